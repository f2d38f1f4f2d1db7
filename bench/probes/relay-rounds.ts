/**
 * Where the relay's time goes with a real broker (bench/README.md *relay*): 30,000 queued events,
 * the dispatcher role's step (real KafkaPublisher) until all are sent, and the sum over rounds
 * of each stage of the `outbox_dispatch_timing` log line. Claim, publish and mark overlap within
 * a round, so their sum exceeds the wall time; discovery, a round's first claim and its last mark
 * do not. `MSGX_PROBE_BATCHES` sets the role's batches per round (default: the role's own).
 *
 *   npx tsx bench/probes/relay-rounds.ts
 */
import { dispatcherRole } from '../../lib/jobs/dispatcherRole.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { ensureTopics } from '../../lib/outbox/topics.ts';
import { eventOf } from '../scenarios/relay.ts';
import { benchContext, freshPg, randomName, serviceUrls } from '../lib/env.ts';

const N = 30_000;
interface TargetLine {
  claim_ms: number;
  mark_ms: number;
  publish_ms: Record<string, number>;
}
interface RoundLine {
  message?: string;
  total_ms: number;
  discover_ms: number;
  sent: number;
  targets: TargetLine[];
}

const pg = await freshPg();
const base = benchContext({
  db: pg.db,
  mailbox: new PgMailbox(pg.db),
  env: {
    MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
    MSGX_TOPIC_MSG: randomName('bench.msg'),
    MSGX_TOPIC_SCHD: randomName('bench.schd'),
  },
});
await ensureTopics(base.config);
const rounds: RoundLine[] = [];
const ctx = {
  ...base,
  log: {
    ...base.log,
    info: (line: unknown) => {
      if ((line as RoundLine)?.message === 'outbox_dispatch_timing') rounds.push(line as RoundLine);
    },
  } as typeof base.log,
};
const events = Array.from({ length: N }, (_, i) => eventOf(i));
for (let i = 0; i < N; i += 5000) await ctx.db.tx((tx) => enqueueEvents(tx, events.slice(i, i + 5000)));
const publisher = new KafkaPublisher(ctx.config.kafka, { publishTimeoutMs: ctx.config.outbox.publishTimeoutMs });
const batches = process.env.MSGX_PROBE_BATCHES;
const role = dispatcherRole(ctx, [publisher], batches ? { maxBatches: Number(batches) } : {});
await role.step({ remainingMs: Number.POSITIVE_INFINITY }); // connects the producer
rounds.length = 0;
const t0 = performance.now();
for (;;) {
  const before = rounds.length;
  await role.step({ remainingMs: Number.POSITIVE_INFINITY });
  if (rounds.length === before) break;
}
const ms = performance.now() - t0;
const sent = rounds.reduce((s, r) => s + r.sent, 0);
const targets = rounds.flatMap((r) => r.targets);
const total = (f: (t: TargetLine) => number) => Math.round(targets.reduce((a, t) => a + f(t), 0));
console.log(
  JSON.stringify({
    eventsPerSec: Math.round((sent / ms) * 1000),
    rounds: rounds.length,
    wallMs: Math.round(ms),
    discoverMs: Math.round(rounds.reduce((a, r) => a + r.discover_ms, 0)),
    claimMs: total((t) => t.claim_ms),
    publishMs: total((t) => t.publish_ms.kafka ?? 0),
    markMs: total((t) => t.mark_ms),
  }),
);
await publisher.close();
await pg.drop();
process.exit(0);
