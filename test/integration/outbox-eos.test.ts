import kafkajs from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { adoptCursor, databaseIdentity } from '../../lib/outbox/commitLog.ts';
import { dispatchOnce, type DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { pendingByTarget } from '../../lib/outbox/queries.ts';
import { ExactlyOnceSinks } from '../../lib/outbox/exactlyOnce.ts';
import { readKafkaCursor, TransactionalTarget } from '../../lib/outbox/publishers/kafkaTransactional.ts';
import { systemClock, type Clock } from '../../lib/shared/clock.ts';
import { createTopics, randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, type TestPg } from '../helpers/services.ts';

/**
 * Exactly once into Kafka for one target (lib/outbox/publishers/kafkaTransactional.ts): records and
 * cursor in one transaction, judged by a read_committed consumer of the test's own.
 */
const topic = randomTopic('msgx-eos');
const offsets = `${topic}.offsets`;
const target = `tx:${topic}`;
const logTopic = randomTopic('msgx-eos-log');
const logTarget = `tx:${logTopic}`;
let kafka: InstanceType<typeof kafkajs.Kafka>;
let pg: TestPg;

beforeAll(async () => {
  const brokers = serviceUrls().kafkaBrokers;
  await createTopics(brokers, [
    { topic },
    { topic: logTopic },
    { topic: offsets, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] },
  ]);
  pg = await freshPg();
  kafka = new kafkajs.Kafka({ clientId: 'msgx-test-eos', brokers, logLevel: kafkajs.logLevel.NOTHING });
}, 60_000);
afterAll(async () => {
  await pg?.drop();
});

/** Every committed record of the topic, as a read_committed consumer sees it. */
const committedValues = async (of = topic): Promise<string[]> =>
  (await readTopicToEnd(serviceUrls().kafkaBrokers, of)).map((r) => r.value ?? '');

const rec = (v: string) => ({ key: 'k', value: v, headers: { 'msgx-event-id': v } });

it('a batch and its cursor commit together; a zombie producer is fenced and its batch never seen; the cursor is read back from Kafka', async () => {
  const first = await TransactionalTarget.open(kafka, { stage: 'test', target, topic, offsetsTopic: offsets });
  await first.deliver([rec('1'), rec('2')], 'cursor-2');

  // The replacement of a dispatcher thought dead: same transactional.id, so the old one is fenced.
  const second = await TransactionalTarget.open(kafka, { stage: 'test', target, topic, offsetsTopic: offsets });
  await expect(first.deliver([rec('zombie')], 'cursor-zombie')).rejects.toThrow();
  expect(await readKafkaCursor(kafka, { stage: 'test', offsetsTopic: offsets, target: target })).toBe('cursor-2');
  await second.deliver([rec('3')], 'cursor-3');

  expect(await committedValues()).toEqual(['1', '2', '3']);
  expect(await readKafkaCursor(kafka, { stage: 'test', offsetsTopic: offsets, target: target })).toBe('cursor-3');
  await second.close();
  await first.close().catch(() => {});
}, 60_000);

const insert = (...values: string[]) =>
  pg.db.query(`INSERT INTO msg_event (target, partition_key, event_type, value) SELECT $1, 'k', 'T', v FROM unnest($2::text[]) v`, [
    logTarget,
    values,
  ]);

/**
 * A dispatcher as lib/jobs/dispatcherRole.ts runs it with exactly once on, at `clock`. One that
 * `diesAfterKafkaCommit` loses its database the moment its first Kafka transaction committed: the
 * records and the cursor are in Kafka, the PostgreSQL mirror and the lease's release never happen.
 */
function eosDispatcher(name: string, clock: Clock, o: { diesAfterKafkaCommit?: boolean } = {}) {
  const config = loadConfig({ MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','), MSGX_TOPIC_OFFSETS: offsets, MSGX_STAGE: 'test' });
  const sinks = new ExactlyOnceSinks(config);
  let dead = false;
  const killed = () => Promise.reject(new Error(`${name} was killed`));
  const db = new Proxy(pg.db, {
    get: (t, p) =>
      p === 'query' || p === 'tx'
        ? (...a: unknown[]) => (dead ? killed() : (Reflect.get(t, p) as (...a: unknown[]) => Promise<unknown>).apply(t, a))
        : Reflect.get(t, p),
  });
  if (o.diesAfterKafkaCommit) {
    const deliver = sinks.deliver.bind(sinks);
    sinks.deliver = async (...a) => {
      const placed = await deliver(...a);
      dead = true;
      return placed;
    };
  }
  const ctx: DispatchContext = { db, config, clock, log: silentLog };
  return {
    round: () => dispatchOnce(ctx, [], { exactlyOnce: sinks, dispatcherId: name, targets: [logTarget], maxBatches: 10 }),
    close: () => sinks.close().catch(() => {}),
  };
}

it('the log relayed exactly once: a dispatcher that dies between its Kafka commit and the PostgreSQL mirror is resumed from the Kafka cursor, nothing sent twice', async () => {
  await insert('a', 'b');
  const first = eosDispatcher('first', systemClock, { diesAfterKafkaCommit: true });
  const died = await first.round();
  expect(died.targets.map((t) => [t.skipped, t.error])).toEqual([['error', 'Error: first was killed']]);

  // The replacement once the dead one's lease ran out: fences its producer, adopts Kafka's cursor.
  await insert('c');
  const later: Clock = { now: () => new Date(Date.now() + loadConfig({}).outbox.leaseMs + 1000), sleep: systemClock.sleep };
  const second = eosDispatcher('second', later);
  let sent = 0;
  for (let r = await second.round(); r.sent > 0 || r.more; r = await second.round()) sent += r.sent;
  expect(sent).toBe(1);
  expect(await committedValues(logTopic)).toEqual(['a', 'b', 'c']);
  await second.close();
  await first.close();
}, 60_000);

it('a dispatcher whose producer another process fenced meanwhile (a Lambda environment reused after another ran) reopens at once: nothing charged, nothing held, each event once', async () => {
  const a = eosDispatcher('env-a', systemClock);
  const b = eosDispatcher('env-b', systemClock);
  try {
    await insert('d');
    expect((await a.round()).sent).toBe(1);
    await insert('e');
    expect((await b.round()).sent).toBe(1); // opens the same transactional.id: env-a's producer is fenced
    await insert('f');
    const back = await a.round();
    expect(back.targets.map((t) => [t.sent, t.retried, t.dead, t.error ?? null])).toEqual([[1, 0, 0, null]]);
    expect(await pendingByTarget(pg.db, new Date())).toEqual([]);
    expect((await committedValues(logTopic)).slice(-3)).toEqual(['d', 'e', 'f']);
  } finally {
    await a.close();
    await b.close();
  }
}, 60_000);

const freshTopic = randomTopic('msgx-eos-fresh');
const freshTarget = `tx:${freshTopic}`;

/** Delivers everything of freshTarget in `db` exactly once through the shared offsets topic. */
async function drainExactlyOnce(db: TestPg['db'], name: string): Promise<void> {
  const config = loadConfig({ MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','), MSGX_TOPIC_OFFSETS: offsets });
  const sinks = new ExactlyOnceSinks(config);
  try {
    const ctx: DispatchContext = { db, config, clock: systemClock, log: silentLog };
    await dispatchOnce(ctx, [], { exactlyOnce: sinks, dispatcherId: name, targets: [freshTarget], maxBatches: 10 });
  } finally {
    await sinks.close();
  }
}

it("a fresh database on an old offsets topic keeps its own cursor: another database's Kafka cursor, ahead of its events, is not adopted", async () => {
  await createTopics(serviceUrls().kafkaBrokers, [{ topic: freshTopic }]);
  const two = await freshPg();
  try {
    // The fresh database's events commit first, then the old one delivers and commits its cursor
    // to Kafka: that cursor's snapshot has passed the fresh database's transactions.
    await enqueueEvents(
      two.db,
      [0, 1, 2].map((i) => ({ target: freshTarget, key: 'k', type: 'T', value: `two-${i}` })),
    );
    await enqueueEvents(
      pg.db,
      [0, 1].map((i) => ({ target: freshTarget, key: 'k', type: 'T', value: `one-${i}` })),
    );
    await drainExactlyOnce(pg.db, 'one');
    await drainExactlyOnce(two.db, 'two');
    expect(await committedValues(freshTopic)).toEqual(['one-0', 'one-1', 'two-0', 'two-1', 'two-2']);
  } finally {
    await two.drop();
  }
}, 60_000);

it('a cursor of another database or from ahead of this one is refused with its reason; a cursor of this database is adopted', async () => {
  const identity = await databaseIdentity(pg.db);
  const cursor = { snapLo: '1:1:', snapHi: null, afterId: 0 };
  expect(await adoptCursor(pg.db, 'adopt-check', { ...cursor, db: 'elsewhere/1' }, identity)).toBe(
    `it was written by database elsewhere/1, this is ${identity}`,
  );
  // A database restored from a backup is behind the cursor its older self committed.
  expect(await adoptCursor(pg.db, 'adopt-check', { ...cursor, snapLo: '999999999999:999999999999:', db: identity }, identity)).toMatch(
    /^it is ahead of this database's transactions/,
  );
  expect(await adoptCursor(pg.db, 'adopt-check', { ...cursor, db: identity }, identity)).toBeNull();
});
