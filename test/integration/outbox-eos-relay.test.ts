import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import type { Db } from '../../lib/db/db.ts';
import { dispatchOnce, type DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { ExactlyOnceSinks } from '../../lib/outbox/exactlyOnce.ts';
import { READ_AHEAD_SQL } from '../../lib/outbox/logLease.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { pendingByTarget } from '../../lib/outbox/queries.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { createTopics, randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, type TestPg } from '../helpers/services.ts';

/**
 * The log relay with exactly once on: each batch and its cursor in one Kafka transaction per
 * target, PostgreSQL's cursor mirrored after. A dispatcher that dies after its Kafka commit and
 * before the mirror is replaced by one that adopts Kafka's cursor: a read_committed consumer of the
 * test's own sees every event once, in order.
 */
const brokers = serviceUrls().kafkaBrokers;
const topic = randomTopic('msgx-eos-relay');
const offsets = randomTopic('msgx-offsets');
const target = `tx:${topic}`;
let pg: TestPg;

beforeAll(async () => {
  await createTopics(brokers, [{ topic }, { topic: offsets, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }]);
  pg = await freshPg();
}, 60_000);
afterAll(async () => {
  await pg?.drop();
});

/** Every record of the topic a read_committed consumer sees (aborted ones never), in offset order. */
const committed = async (of: string): Promise<{ id: string; value: string }[]> =>
  (await readTopicToEnd(brokers, of)).map((r) => ({ id: r.headers['msgx-event-id'] ?? '', value: r.value ?? '' }));

it('a dispatcher killed between its Kafka commit and the mirror: its replacement adopts the cursor, every event is seen once', async () => {
  const config = loadConfig({
    MSGX_KAFKA_BROKERS: brokers.join(','),
    MSGX_TOPIC_OFFSETS: offsets,
    MSGX_DELIVERY_BATCH_SIZE: '7',
    MSGX_DELIVERY_LEASE: '10s',
  });
  expect(config.outbox.exactlyOnce).toBe(true);
  const clock = new FakeClock('2026-11-29T00:00:00Z');
  const values = Array.from({ length: 20 }, (_, i) => `v${i}`);
  const ids = await enqueueEvents(
    pg.db,
    values.map((v, i) => ({ target, key: `k${i % 3}`, type: 'T', value: v })),
  );

  // The first dispatcher: its second mirror never reaches PostgreSQL (the process died there).
  let finishes = 0;
  const dying: Db = Object.create(pg.db, {
    query: {
      value: (sql: string, params?: unknown[]) => {
        if (/snap_lo = CASE/.test(sql) && ++finishes === 2) return Promise.reject(new Error('killed before the mirror'));
        return pg.db.query(sql, params);
      },
    },
  }) as Db;
  const first = new ExactlyOnceSinks(config);
  const plain = new KafkaPublisher(config.kafka, { publishTimeoutMs: 3000 });
  const ctx1: DispatchContext = { db: dying, config, clock, log: silentLog };
  // One batch per round, so its second mirror is that of the second batch (a longer round reads them as one page).
  for (let i = 0; i < 2; i++)
    await dispatchOnce(ctx1, [plain], { exactlyOnce: first, dispatcherId: 'first', targets: [target], maxBatches: 1 });
  expect(finishes).toBe(2);
  // Two batches are in Kafka, PostgreSQL mirrored one: it still shows the second as being delivered.
  expect((await committed(topic)).map((r) => r.value)).toEqual(values.slice(0, 14));
  expect((await pendingByTarget(pg.db, clock.now()))[0]).toMatchObject({ delivering: 13, pending: 0 });

  // Its replacement, once the lease ran out: it fences the old producer and adopts Kafka's cursor.
  clock.advance(10_000);
  const second = new ExactlyOnceSinks(config);
  const ctx2: DispatchContext = { db: pg.db, config, clock, log: silentLog };
  for (let i = 0; i < 10 && (await pendingByTarget(pg.db, clock.now())).length > 0; i++)
    await dispatchOnce(ctx2, [plain], { exactlyOnce: second, dispatcherId: 'second', targets: [target], maxBatches: 10 });
  expect(await pendingByTarget(pg.db, clock.now())).toEqual([]);
  const seen = await committed(topic);
  expect(seen.map((r) => r.id)).toEqual(ids.map(String));
  expect(seen.map((r) => r.value)).toEqual(values);

  await Promise.all([first.close(), second.close(), plain.close()]);
}, 120_000);

it('a page whose mirror fails while the next publishes: the next one is in Kafka with its cursor, the one behind it is not, the replacement resumes after it', async () => {
  const topic2 = randomTopic('msgx-eos-ahead');
  const target2 = `tx:${topic2}`;
  await createTopics(brokers, [{ topic: topic2 }]);
  const config = loadConfig({
    MSGX_KAFKA_BROKERS: brokers.join(','),
    MSGX_TOPIC_OFFSETS: offsets,
    MSGX_DELIVERY_BATCH_SIZE: '5',
    MSGX_DELIVERY_LEASE: '10s',
  });
  const clock = new FakeClock('2026-11-29T00:00:00Z');
  // Pages of 10 batches: 50 events each, each read while the one before is published.
  const values = Array.from({ length: 120 }, (_, i) => `w${i}`);
  const ids = await enqueueEvents(
    pg.db,
    values.map((v, i) => ({ target: target2, key: `k${i % 4}`, type: 'T', value: v })),
  );
  let aheads = 0;
  let finishes = 0;
  const dying: Db = Object.create(pg.db, {
    query: {
      value: (sql: string, params?: unknown[]) => {
        if (sql === READ_AHEAD_SQL) aheads++;
        if (/snap_lo = CASE/.test(sql) && ++finishes === 1) return Promise.reject(new Error('killed before the mirror'));
        return pg.db.query(sql, params);
      },
    },
  }) as Db;
  const first = new ExactlyOnceSinks(config);
  const plain = new KafkaPublisher(config.kafka, { publishTimeoutMs: 3000 });
  await dispatchOnce({ db: dying, config, clock, log: silentLog }, [plain], {
    exactlyOnce: first,
    dispatcherId: 'first',
    targets: [target2],
    maxBatches: 40,
  });
  expect(aheads).toBe(2);
  // The first page's mirror failed while the second was published in its own Kafka transaction,
  // with the cursor after it; the third, read ahead behind the second, went nowhere.
  expect((await committed(topic2)).map((r) => r.value)).toEqual(values.slice(0, 100));

  clock.advance(10_000);
  const second = new ExactlyOnceSinks(config);
  for (let i = 0; i < 10 && (await pendingByTarget(pg.db, clock.now())).some((p) => p.target === target2); i++)
    await dispatchOnce({ db: pg.db, config, clock, log: silentLog }, [plain], {
      exactlyOnce: second,
      dispatcherId: 'second',
      targets: [target2],
      maxBatches: 40,
    });
  const seen = await committed(topic2);
  expect(seen.map((r) => r.id)).toEqual(ids.map(String));
  expect(seen.map((r) => r.value)).toEqual(values);
  await Promise.all([first.close(), second.close(), plain.close()]);
}, 120_000);

it('the same dispatcher after a mirror that failed: it adopts Kafka’s cursor again and sends nothing twice', async () => {
  const topic3 = randomTopic('msgx-eos-same');
  const target3 = `tx:${topic3}`;
  await createTopics(brokers, [{ topic: topic3 }]);
  const config = loadConfig({
    MSGX_KAFKA_BROKERS: brokers.join(','),
    MSGX_TOPIC_OFFSETS: offsets,
    MSGX_DELIVERY_BATCH_SIZE: '5',
  });
  const clock = new FakeClock('2026-11-29T00:00:00Z');
  const values = Array.from({ length: 120 }, (_, i) => `s${i}`);
  const ids = await enqueueEvents(
    pg.db,
    values.map((v, i) => ({ target: target3, key: `k${i % 4}`, type: 'T', value: v })),
  );
  let finishes = 0;
  // The database refuses one finish (a failover, a dropped connection), then works again.
  const flaky: Db = Object.create(pg.db, {
    query: {
      value: (sql: string, params?: unknown[]) => {
        if (/snap_lo = CASE/.test(sql) && ++finishes === 1) return Promise.reject(new Error('connection terminated'));
        return pg.db.query(sql, params);
      },
    },
  }) as Db;
  const sinks = new ExactlyOnceSinks(config);
  const plain = new KafkaPublisher(config.kafka, { publishTimeoutMs: 3000 });
  for (let i = 0; i < 10 && (await pendingByTarget(pg.db, clock.now())).some((p) => p.target === target3); i++)
    await dispatchOnce({ db: flaky, config, clock, log: silentLog }, [plain], {
      exactlyOnce: sinks,
      dispatcherId: 'only',
      targets: [target3],
      maxBatches: 40,
    });
  expect(finishes).toBeGreaterThan(1);
  const seen = await committed(topic3);
  expect(seen.map((r) => r.id)).toEqual(ids.map(String));
  expect(seen.map((r) => r.value)).toEqual(values);
  await Promise.all([sinks.close(), plain.close()]);
}, 120_000);
