import { randomBytes } from 'node:crypto';
import kafkajs from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { cursorGroupPrefix, transactionalId } from '../../lib/constants.ts';
import type { Db } from '../../lib/db/db.ts';
import { dispatchOnce, type DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { ExactlyOnceSinks } from '../../lib/outbox/exactlyOnce.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { pendingByTarget } from '../../lib/outbox/queries.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { committedEnds, createTopics, memoryLog, randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, type TestPg } from '../helpers/services.ts';

/**
 * Exactly once, at start: a dispatcher whose PostgreSQL mirror is provably current (the offsets
 * record it mirrored is still the last of its partition) keeps PostgreSQL's cursor and does not read
 * the offsets topic back (no cursor consumer group ever joins); one that finds anything written after
 * that record reads the topic and adopts Kafka's cursor. Judged from outside: the broker's consumer
 * groups, the dispatcher's log, and a read_committed consumer of the test's own.
 */
const brokers = serviceUrls().kafkaBrokers;
let pg: TestPg;
let kafka: InstanceType<typeof kafkajs.Kafka>;

beforeAll(async () => {
  pg = await freshPg();
  kafka = new kafkajs.Kafka({ clientId: 'msgx-test-eos-skip', brokers, logLevel: kafkajs.logLevel.NOTHING });
}, 60_000);
afterAll(async () => {
  await pg?.drop();
});

/** A target and its own one-partition offsets topic and stage (so its cursor groups are its own). */
async function world(o: { offsetsConfig?: { name: string; value: string }[] } = {}) {
  const topic = randomTopic('msgx-eos-skip');
  const offsets = randomTopic('msgx-offsets-skip');
  const stage = `skip${randomBytes(4).toString('hex')}`;
  await createTopics(brokers, [
    { topic },
    { topic: offsets, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact' }, ...(o.offsetsConfig ?? [])] },
  ]);
  const config = loadConfig({
    MSGX_KAFKA_BROKERS: brokers.join(','),
    MSGX_TOPIC_OFFSETS: offsets,
    MSGX_STAGE: stage,
    MSGX_DELIVERY_LEASE: '10s',
  });
  expect(config.outbox.exactlyOnce).toBe(true);
  return { topic, offsets, stage, config, target: `tx:${topic}` };
}
type World = Awaited<ReturnType<typeof world>>;

const insert = (target: string, ...values: string[]) =>
  pg.db.query(`INSERT INTO msg_event (target, partition_key, event_type, value) SELECT $1, 'k', 'T', v FROM unnest($2::text[]) v`, [
    target,
    values,
  ]);

/**
 * A dispatcher process of `w` (a restart is a new one: its producers and cursors are opened anew,
 * as at a Lambda cold start). With `mirrorFails` the statement that mirrors a committed Kafka
 * transaction to PostgreSQL never lands (the process died there).
 */
function dispatcher(w: World, name: string, clock: FakeClock, o: { mirrorFails?: boolean } = {}) {
  const log = memoryLog();
  const sinks = new ExactlyOnceSinks(w.config, { log });
  const db: Db = Object.create(pg.db, {
    query: {
      value: (sql: string, params?: unknown[]) =>
        o.mirrorFails && /snap_lo = CASE/.test(sql)
          ? Promise.reject(new Error(`${name} killed before the mirror`))
          : pg.db.query(sql, params),
    },
  }) as Db;
  const ctx: DispatchContext = { db, config: w.config, clock, log };
  return {
    log,
    round: () => dispatchOnce(ctx, [], { exactlyOnce: sinks, dispatcherId: name, targets: [w.target], maxBatches: 10 }),
    close: () => sinks.close().catch(() => {}),
  };
}

/** The log lines that say the cursor was taken from PostgreSQL without reading the topic. */
const fromPostgres = (log: ReturnType<typeof memoryLog>) =>
  log.lines.map((l) => String(l.line.message)).filter((m) => m.startsWith('cursor from PostgreSQL'));

/** The stage's cursor consumer groups the broker knows: each read of the offsets topic joins one. */
async function cursorGroups(w: World): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const { groups } = await admin.listGroups();
    return groups.map((g) => g.groupId).filter((g) => g.startsWith(cursorGroupPrefix(w.stage)));
  } finally {
    await admin.disconnect();
  }
}

/** The offsets topic's end (kafkajs answers the last stable offset) and what PostgreSQL mirrored. */
async function positions(w: World): Promise<{ end: number; mirrored: number | null }> {
  const [end] = await committedEnds(kafka, w.offsets);
  const r = await pg.db.query<{ o: string | null }>(`SELECT offsets_offset AS o FROM outbox_target WHERE target = $1`, [w.target]);
  return { end: Number(end!.high), mirrored: r.rows[0]?.o == null ? null : Number(r.rows[0].o) };
}

/** Every committed value of the topic, as a read_committed consumer sees it. */
const committed = async (topic: string): Promise<string[]> =>
  (await readTopicToEnd(serviceUrls().kafkaBrokers, topic)).map((r) => r.value ?? '');

async function drain(d: ReturnType<typeof dispatcher>): Promise<number> {
  let sent = 0;
  for (let r = await d.round(), i = 0; (r.sent > 0 || r.more) && i < 10; r = await d.round(), i++) sent += r.sent;
  return sent;
}

/** A dispatcher's life: started, drained (it must deliver `expected` events), closed; its log stays. */
async function run(w: World, name: string, clock: FakeClock, expected: number): Promise<ReturnType<typeof dispatcher>> {
  const d = dispatcher(w, name, clock);
  expect(await drain(d)).toBe(expected);
  await d.close();
  return d;
}

it('a restarted dispatcher whose mirror is current keeps PostgreSQL cursor without reading the offsets topic, and delivers exactly once', async () => {
  const w = await world();
  const clock = new FakeClock('2026-12-04T00:00:00Z');
  await insert(w.target, 'a', 'b');
  await run(w, 'first', clock, 2);
  // The rule, on the real broker: the mirrored record, then its transaction's commit marker, then the end.
  const p = await positions(w);
  expect(p.mirrored).not.toBeNull();
  expect(p.end).toBe(p.mirrored! + 2);

  await insert(w.target, 'c');
  const restarted = await run(w, 'restarted', clock, 1);
  expect(fromPostgres(restarted.log)).toEqual([`cursor from PostgreSQL (offsets record ${p.mirrored} is the last)`]);
  // Neither dispatcher ever joined a cursor group: the first found the offsets topic empty, the restarted one did not read it.
  expect(await cursorGroups(w)).toEqual([]);
  expect(await committed(w.topic)).toEqual(['a', 'b', 'c']);
  expect(await pendingByTarget(pg.db, clock.now())).toEqual([]);
  // Its own commit moved the mirror on: the next start skips again.
  const q = await positions(w);
  expect(q.end).toBe(q.mirrored! + 2);
  expect(q.mirrored).toBeGreaterThan(p.mirrored!);
}, 60_000);

it('a record written to the offsets topic after the mirror (a Kafka commit whose mirror died): the restart reads the topic and adopts Kafka cursor, nothing twice', async () => {
  const w = await world();
  const clock = new FakeClock('2026-12-04T00:00:00Z');
  await insert(w.target, 'a', 'b');
  await run(w, 'first', clock, 2);
  const mirrored = (await positions(w)).mirrored!;

  // Committed in Kafka, never mirrored: PostgreSQL still names the record before it.
  await insert(w.target, 'c', 'd');
  const dying = dispatcher(w, 'dying', clock, { mirrorFails: true });
  await dying.round();
  await dying.close();
  expect(await committed(w.topic)).toEqual(['a', 'b', 'c', 'd']);
  expect(await positions(w)).toEqual({ end: mirrored + 4, mirrored });

  clock.advance(10_000); // the dead one's lease ran out
  await insert(w.target, 'e');
  const restarted = await run(w, 'restarted', clock, 1);
  expect(fromPostgres(restarted.log)).toEqual([]);
  expect(await cursorGroups(w)).toHaveLength(1); // the restart's read
  expect(await committed(w.topic)).toEqual(['a', 'b', 'c', 'd', 'e']);
  expect(await pendingByTarget(pg.db, clock.now())).toEqual([]);
}, 60_000);

it("another transaction after ours on the offsets partition (another target's commit, a zombie's open transaction) forces the read", async () => {
  const w = await world();
  const clock = new FakeClock('2026-12-04T00:00:00Z');
  await insert(w.target, 'a');
  await run(w, 'first', clock, 1);

  // Another target's cursor, committed to the same (only) partition after ours.
  const other = { ...w, target: `${w.target}.other` };
  await createTopics(brokers, [{ topic: `${w.topic}.other` }]);
  await insert(other.target, 'x');
  await run(other, 'neighbour', clock, 1);

  await insert(w.target, 'b');
  const before = (await cursorGroups(w)).length; // the neighbour's own first start read the topic
  const restarted = await run(w, 'restarted', clock, 1);
  expect(fromPostgres(restarted.log)).toEqual([]);
  expect(await cursorGroups(w)).toHaveLength(before + 1);

  // A zombie of the target's own transactional.id with a cursor record in an open transaction: the
  // restart's producer fences it (the broker aborts that transaction), and the abort is after ours.
  const zombie = kafka.producer({ transactionalId: transactionalId(w.stage, w.target), idempotent: true, maxInFlightRequests: 1 });
  await zombie.connect();
  const tx = await zombie.transaction();
  await tx.send({ topic: w.offsets, messages: [{ key: w.target, value: '{"snapLo":"1:1:","snapHi":null,"afterId":0}' }] });
  await insert(w.target, 'c');
  const again = await run(w, 'again', clock, 1);
  await zombie.disconnect();
  expect(fromPostgres(again.log)).toEqual([]);
  expect(await cursorGroups(w)).toHaveLength(before + 2);
  expect(await committed(w.topic)).toEqual(['a', 'b', 'c']);
  expect(await committed(`${w.topic}.other`)).toEqual(['x']);
}, 60_000);

it("a cursor that moves without a Kafka commit (a round at least once) is no record's cursor: the mirrored position is cleared and the next start reads", async () => {
  const w = await world();
  const clock = new FakeClock('2026-12-04T00:00:00Z');
  await insert(w.target, 'a');
  await run(w, 'first', clock, 1);
  expect((await positions(w)).mirrored).not.toBeNull();

  // MSGX_KAFKA_EXACTLY_ONCE=false for a while: the plain producer, PostgreSQL's cursor alone moves.
  await insert(w.target, 'b');
  const plain = new KafkaPublisher(w.config.kafka, { publishTimeoutMs: 3000 });
  try {
    const ctx: DispatchContext = { db: pg.db, config: w.config, clock, log: memoryLog() };
    expect((await dispatchOnce(ctx, [plain], { dispatcherId: 'plain', targets: [w.target], maxBatches: 10 })).sent).toBe(1);
  } finally {
    await plain.close();
  }
  expect((await positions(w)).mirrored).toBeNull();

  // The start reads Kafka's cursor, as before the skip existed (whether to adopt it is adoptCursor's).
  await insert(w.target, 'c');
  const restarted = dispatcher(w, 'restarted', clock);
  await drain(restarted);
  await restarted.close();
  expect(fromPostgres(restarted.log)).toEqual([]);
  expect(await cursorGroups(w)).toHaveLength(1);
}, 60_000);

it('an offsets topic whose partition count changed since the mirror (the key may hash elsewhere) is read', async () => {
  const w = await world();
  const clock = new FakeClock('2026-12-04T00:00:00Z');
  await insert(w.target, 'a');
  await run(w, 'first', clock, 1);
  const admin = kafka.admin();
  await admin.connect();
  await admin.createPartitions({ topicPartitions: [{ topic: w.offsets, count: 2 }] }).finally(() => admin.disconnect());

  await insert(w.target, 'b');
  const restarted = await run(w, 'restarted', clock, 1);
  expect(fromPostgres(restarted.log)).toEqual([]);
  expect(await cursorGroups(w)).toHaveLength(1);
  expect(await committed(w.topic)).toEqual(['a', 'b']);
}, 60_000);

it('an offsets partition whose tail is an aborted transaction in a fetch of its own (a fenced zombie last) is read to its end', async () => {
  // Segments that roll after 100 ms: the broker answers a fetch from one segment, so the aborted
  // record and its marker, written to a segment of their own, come in fetches that hold nothing a
  // read_committed consumer may see.
  const w = await world({ offsetsConfig: [{ name: 'segment.ms', value: '100' }] });
  const clock = new FakeClock('2026-12-04T00:00:00Z');
  await insert(w.target, 'a');
  await run(w, 'first', clock, 1);
  await new Promise((r) => setTimeout(r, 250)); // the broker's segment age, not msgx's clock

  const zombie = kafka.producer({ transactionalId: transactionalId(w.stage, w.target), idempotent: true, maxInFlightRequests: 1 });
  await zombie.connect();
  const tx = await zombie.transaction();
  await tx.send({ topic: w.offsets, messages: [{ key: w.target, value: '{"snapLo":"1:1:","snapHi":null,"afterId":0}' }] });
  await tx.abort();
  await zombie.disconnect();

  await insert(w.target, 'b');
  const restarted = await run(w, 'restarted', clock, 1);
  expect(fromPostgres(restarted.log)).toEqual([]); // the abort after our record forced the read
  expect(await cursorGroups(w)).toHaveLength(1);
  expect(await committed(w.topic)).toEqual(['a', 'b']);
}, 60_000);
