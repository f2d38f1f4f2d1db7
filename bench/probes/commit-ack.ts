/**
 * Commit-to-ack of the relay on its own (bench/README.md *relay*): a backlog of N events is queued
 * and drained first (the relay scenario times the trickle after 100,000 events), then
 * runWorker(dispatcherRole) woken by NOTIFY with an instant publisher, and T single-event
 * transactions one every 10 ms; t0 before each transaction, the end when publish() is called with it.
 *
 *   npx tsx bench/probes/commit-ack.ts [backlog=0] [trickle=200]
 */
import { dispatcherRole } from '../../lib/jobs/dispatcherRole.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import type { OutRecord, Publisher, PublishResult } from '../../lib/outbox/types.ts';
import { eventOf } from '../scenarios/relay.ts';
import { benchContext, freshPg } from '../lib/env.ts';
import { latency, sleep } from '../lib/stats.ts';

const N = Number(process.argv[2] ?? 0);
const T = Number(process.argv[3] ?? 200);
const acks = new Map<number, number>();
const instant: Publisher = {
  name: 'kafka',
  async publish(records: OutRecord[]): Promise<PublishResult[]> {
    const at = performance.now();
    for (const r of records) if (!acks.has(r.eventId)) acks.set(r.eventId, at);
    return records.map((_, i) => ({ ok: true as const, partition: 0, offset: i }));
  },
  async close() {},
};

const pg = await freshPg();
try {
  const ctx = benchContext({ db: pg.db, mailbox: new PgMailbox(pg.db) });
  const events = Array.from({ length: N }, (_, i) => eventOf(i));
  for (let i = 0; i < N; i += 5000) await ctx.db.tx((tx) => enqueueEvents(tx, events.slice(i, i + 5000)));
  const role = dispatcherRole(ctx, [instant]);
  while ((await role.step({ remainingMs: Number.POSITIVE_INFINITY })).busy);
  if (N > 0) await ctx.db.query('VACUUM ANALYZE msg_event');
  const stop = new AbortController();
  const worker = runWorker(ctx, { ...dispatcherRole(ctx, [instant]), signal: stop.signal });
  await sleep(200);
  const starts = new Map<number, number>();
  for (let i = 0; i < T; i++) {
    const t0 = performance.now();
    const [id] = await ctx.db.tx((tx) => enqueueEvents(tx, [eventOf(i)]));
    starts.set(id!, t0);
    await sleep(10);
  }
  await sleep(1_000);
  stop.abort();
  await worker;
  const lat = [...starts].filter(([id]) => acks.has(id)).map(([id, t0]) => acks.get(id)! - t0);
  const l = latency(lat);
  console.log(
    `backlog ${N}: ${lat.length}/${T} acked; commit-to-ack p50 ${l.p50.toFixed(2)} ms, p99 ${l.p99.toFixed(2)} ms, max ${l.max.toFixed(2)} ms`,
  );
} finally {
  await pg.drop();
}
