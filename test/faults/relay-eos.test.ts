import { spawn } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { dispatchOnce, type DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { ExactlyOnceSinks } from '../../lib/outbox/exactlyOnce.ts';
import { pendingByTarget } from '../../lib/outbox/queries.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import { createTopics, randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, waitFor, type TestPg } from '../helpers/services.ts';

/**
 * The dispatcher SIGKILLed inside a Kafka transaction (exactly once on): its batch's records are on
 * the broker, the commit never came. Its replacement fences it (the broker aborts the open
 * transaction), adopts the cursor Kafka committed and delivers the rest. A read_committed consumer
 * of the test's own counts every event exactly once, in order; a read_uncommitted one also sees
 * the aborted records, so the kill did land inside the transaction.
 */
const brokers = serviceUrls().kafkaBrokers;
const offsets = randomTopic('msgx-fault-offsets');
// One batch per round (a page of one batch, one transaction), and pages of 10 batches of 2 where
// the child hangs inside the transaction of a page it read ahead while the first was published.
const shapes = [
  { name: 'one batch per round', batch: 10, maxBatches: 1, topic: randomTopic('msgx-fault-eos') },
  { name: 'a page read ahead', batch: 2, maxBatches: 40, topic: randomTopic('msgx-fault-eos-ahead') },
];
let pg: TestPg;

beforeAll(async () => {
  await createTopics(brokers, [
    ...shapes.map((c) => ({ topic: c.topic })),
    { topic: offsets, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] },
  ]);
  pg = await freshPg();
});
afterAll(async () => {
  await pg?.drop();
});

/** The msgx-event-ids of the topic in offset order, as a consumer of the given isolation sees them. */
const eventIds = async (topic: string, readUncommitted: boolean): Promise<string[]> =>
  (await readTopicToEnd(brokers, topic, { readUncommitted })).map((r) => r.headers['msgx-event-id'] ?? '');

// The child: delivers its first batch, then sends the second inside its transaction and hangs
// before the commit (the parent SIGKILLs it there). Should it deliver everything without ever
// hanging, the parent's wait names what it printed.
const CHILD_SCRIPT = `
import { PgDb } from './lib/db/pg.ts';
import { loadConfig } from './lib/config/config.ts';
import { dispatchOnce } from './lib/outbox/dispatcher.ts';
import { ExactlyOnceSinks } from './lib/outbox/exactlyOnce.ts';
import { TransactionalTarget } from './lib/outbox/publishers/kafkaTransactional.ts';
import { silentLog } from './lib/observability/logger.ts';
import { systemClock } from './lib/shared/clock.ts';
const deliver = TransactionalTarget.prototype.deliver;
let n = 0;
TransactionalTarget.prototype.deliver = async function (records, cursor) {
  if (++n === 1) { console.log('committed ' + records.length); return deliver.call(this, records, cursor); }
  const tx = await this.producer.transaction();
  await tx.send({ topic: this.topic, messages: records });
  console.log('in-transaction ' + records.length);
  await new Promise(() => {});
};
const db = new PgDb(process.env.CHILD_PG_URL);
const config = loadConfig({ MSGX_KAFKA_BROKERS: process.env.CHILD_BROKERS, MSGX_TOPIC_OFFSETS: process.env.CHILD_OFFSETS,
  MSGX_DELIVERY_BATCH_SIZE: process.env.CHILD_BATCH, MSGX_DELIVERY_LEASE: '3s', MSGX_DELIVERY_PUBLISH_TIMEOUT: '2s' });
// A round's batches go to Kafka as pages of up to 10 batches, one transaction each.
const ctx = { db, config, clock: systemClock, log: silentLog };
const opts = { exactlyOnce: new ExactlyOnceSinks(config), dispatcherId: 'child', targets: [process.env.CHILD_TARGET],
  maxBatches: Number(process.env.CHILD_MAX_BATCHES) };
for (;;) { await dispatchOnce(ctx, [], opts); await new Promise((r) => setTimeout(r, 20)); }
`;

for (const shape of shapes)
  it(`a dispatcher SIGKILLed inside a Kafka transaction (${shape.name}): a read_committed consumer counts every event exactly once`, async () => {
    const { topic } = shape;
    const target = `tx:${topic}`;
    // The child's page: a batch, or 10 of them.
    const page = shape.batch * Math.min(10, shape.maxBatches);
    const ids = (
      await enqueueEvents(
        pg.db,
        Array.from({ length: 50 }, (_, i) => ({ target, key: `k${i % 4}`, type: 'T', value: { i } })),
      )
    ).map(String);
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD_SCRIPT], {
      cwd: process.cwd(),
      env: {
        ...process.env,
        CHILD_PG_URL: pg.url,
        CHILD_BROKERS: brokers.join(','),
        CHILD_OFFSETS: offsets,
        CHILD_TARGET: target,
        CHILD_BATCH: String(shape.batch),
        CHILD_MAX_BATCHES: String(shape.maxBatches),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    await waitFor(() => out.includes(`in-transaction ${page}`), {
      timeoutMs: 60_000,
      what: `the child inside its transaction (stdout: ${out.slice(-300)}; stderr: ${err.slice(-500)})`,
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));

    // The replacement: once the child's lease ran out it fences the child's producer and goes on.
    const config = loadConfig({
      MSGX_KAFKA_BROKERS: brokers.join(','),
      MSGX_TOPIC_OFFSETS: offsets,
      MSGX_DELIVERY_BATCH_SIZE: String(shape.batch),
      MSGX_DELIVERY_LEASE: '3s',
      MSGX_DELIVERY_PUBLISH_TIMEOUT: '2s',
    });
    const ctx: DispatchContext = { db: pg.db, config, clock: systemClock, log: silentLog };
    const sinks = new ExactlyOnceSinks(config);
    try {
      await waitFor(
        async () => {
          await dispatchOnce(ctx, [], { exactlyOnce: sinks, dispatcherId: 'replacement', targets: [target], maxBatches: 40 });
          return (await pendingByTarget(pg.db, new Date())).length === 0;
        },
        { timeoutMs: 60_000, what: 'the replacement to deliver the rest' },
      );
    } finally {
      await sinks.close();
    }
    expect(await eventIds(topic, false)).toEqual(ids);
    // Aborted, yet on the broker: the records of the killed transaction, seen only uncommitted.
    const uncommitted = await eventIds(topic, true);
    expect(uncommitted).toHaveLength(50 + page);
    expect(uncommitted.slice(page, 2 * page)).toEqual(ids.slice(page, 2 * page));
  });
