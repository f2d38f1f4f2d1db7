import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { loadConfig, type Config } from '../../lib/config/config.ts';
import { migrate } from '../../lib/db/migrate.ts';
import { PgliteDb } from '../../lib/db/pglite.ts';
import type { Db, Queryable } from '../../lib/db/db.ts';
import { dispatchOnce, type DispatchContext, type SentEvent } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents, type NewEvent } from '../../lib/outbox/enqueue.ts';
import { replayDeadEvents } from '../../lib/outbox/replay.ts';
import { deadEvents, pendingByTarget } from '../../lib/outbox/queries.ts';
import type { OutboxMetrics } from '../../lib/outbox/metrics.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { FakePublisher, memoryLog } from '../helpers/kafka.ts';

// Unit tests: embedded PostgreSQL (PGlite, in memory), a fake clock, fake publishers. No sleeps:
// time moves only by clock.advance().

let db: PgliteDb;
beforeAll(async () => {
  db = await PgliteDb.open();
  await migrate(db);
}, 180_000); // PGlite start + every migration: ~60 s on a loaded 2-core machine
afterAll(async () => {
  await db?.close();
});
beforeEach(async () => {
  await db.query(`TRUNCATE msg_event, event_delivery, outbox_target, outbox_exception, audit_log RESTART IDENTITY CASCADE`);
});

const baseEnv = {
  MSGX_DELIVERY_BATCH_SIZE: '100',
  MSGX_DELIVERY_MAX_RETRY_COUNT: '3',
  MSGX_DELIVERY_INITIAL_BACKOFF: '5s',
  MSGX_DELIVERY_MAX_BACKOFF: '5m',
  MSGX_DELIVERY_PUBLISH_TIMEOUT: '3s',
  MSGX_DELIVERY_LEASE: '30s',
};

function setup(env: Record<string, string> = {}) {
  const clock = new FakeClock('2026-11-29T00:00:00Z');
  const log = memoryLog();
  const config: Config = loadConfig({ ...baseEnv, ...env });
  const ctx: DispatchContext = { db, config, clock, log };
  return { clock, log, config, ctx };
}

const ev = (target: string, n: number, extra: Partial<NewEvent> = {}): NewEvent => ({
  target,
  key: `F${n % 3}`,
  type: 'FLIGHT_UPDATED',
  value: { n },
  ...extra,
});

async function enqueue(clock: FakeClock, events: NewEvent[], q: Queryable = db): Promise<number[]> {
  return enqueueEvents(q, events, { now: clock.now() });
}

/** Each event's state as every reader derives it (msgx_event_state), at `at` (a lease is live until then). */
async function statusOf(ids: number[], at = new Date()): Promise<Record<number, { status: string; attempts: number }>> {
  const r = await db.query<{ event_id: number; status: string; attempts: number }>(
    `SELECT e.event_id, msgx_event_state(e.status, e.target, e.event_id, e.writer_xid, $2) AS status, coalesce(x.attempts, 0) AS attempts
     FROM msg_event e LEFT JOIN outbox_exception x ON x.target = e.target AND x.event_id = e.event_id WHERE e.event_id = ANY($1)`,
    [ids, at],
  );
  return Object.fromEntries(r.rows.map((x) => [x.event_id, { status: x.status, attempts: x.attempts }]));
}

describe('ordinary targets', () => {
  test('a value reaches the publisher exactly as given: an object as its JSON text, text as is, null as a tombstone', async () => {
    const { clock, ctx } = setup();
    const object = { b: 1, a: ['x"y', 'é\\n', { nested: null }], toString: 'own key', emoji: '✈️' };
    const text = '{"kept": "as sent",  "spaces": true}';
    await enqueue(clock, [
      ev('msg', 1, { value: object }),
      ev('msg', 2, { value: text }),
      ev('msg', 3, { value: null }),
      ev('msg', 4, { value: [1, 'two'] }),
    ]);
    const pub = new FakePublisher('kafka');
    await dispatchOnce(ctx, [pub]);
    expect(pub.delivered.map((r) => r.value)).toEqual([JSON.stringify(object), text, null, '[1,"two"]']);
  });

  test('delivers each target in event_id order with the msgx headers; the events show SENT', async () => {
    const { clock, ctx } = setup();
    const ids = await enqueue(clock, [ev('msg', 1, { headers: { trace: 't1' } }), ev('msg', 2), ev('tx:orders', 3), ev('msg', 4)]);
    const pub = new FakePublisher('kafka');

    const report = await dispatchOnce(ctx, [pub]);

    expect(report.sent).toBe(4);
    const msg = pub.delivered.filter((r) => r.target === 'msg');
    expect(msg.map((r) => r.eventId)).toEqual([ids[0], ids[1], ids[3]]);
    expect(msg[0]!.topic).toBe('msgx.msg');
    expect(msg[0]!.headers).toMatchObject({ trace: 't1', 'msgx-event-id': String(ids[0]), 'msgx-event-type': 'FLIGHT_UPDATED' });
    expect(msg[0]!.value).toBe('{"n":1}');
    expect(pub.delivered.find((r) => r.target === 'tx:orders')!.topic).toBe('orders');
    const st = await statusOf(ids);
    expect(ids.map((id) => st[id]?.status)).toEqual(['SENT', 'SENT', 'SENT', 'SENT']);
  });

  test('one batch per round per target, and `more` says a full batch was sent', async () => {
    const { clock, ctx } = setup({ MSGX_DELIVERY_BATCH_SIZE: '10' });
    await enqueue(
      clock,
      Array.from({ length: 25 }, (_, i) => ev('msg', i)),
    );
    const pub = new FakePublisher();
    const r1 = await dispatchOnce(ctx, [pub]);
    expect(r1.sent).toBe(10);
    expect(r1.more).toBe(true);
    await dispatchOnce(ctx, [pub]);
    const r3 = await dispatchOnce(ctx, [pub]);
    expect(r3.sent).toBe(5);
    expect(r3.more).toBe(false);
    expect(pub.calls.map((c) => c.length)).toEqual([10, 10, 5]);
    const seen = pub.delivered.map((r) => r.eventId);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
  });

  test('maxBatches lets one round go on while batches come back full', async () => {
    const { clock, ctx } = setup({ MSGX_DELIVERY_BATCH_SIZE: '10' });
    await enqueue(
      clock,
      Array.from({ length: 35 }, (_, i) => ev('msg', i)),
    );
    const pub = new FakePublisher();
    const r = await dispatchOnce(ctx, [pub], { maxBatches: 3 });
    expect(r.sent).toBe(30);
    expect(r.more).toBe(true);
    expect(pub.calls.map((c) => c.length)).toEqual([10, 10, 10]);
    const r2 = await dispatchOnce(ctx, [pub], { maxBatches: 3 });
    expect(r2.sent).toBe(5);
    expect(r2.more).toBe(false);
  });

  test('batches in a round: when batch N fails, batch N+1 is not published and waits behind it', async () => {
    const { clock, ctx } = setup({ MSGX_DELIVERY_BATCH_SIZE: '2' });
    const ids = await enqueue(
      clock,
      Array.from({ length: 5 }, (_, i) => ev('msg', i)),
    );
    const pub = new FakePublisher();
    pub.failIds.add(ids[2]!);
    const r = await dispatchOnce(ctx, [pub], { maxBatches: 5 });
    expect(pub.calls.map((c) => c.map((x) => x.eventId))).toEqual([ids.slice(0, 2), ids.slice(2, 4)]);
    expect(r.sent).toBe(2);
    expect(r.more).toBe(false);
    expect(await statusOf(ids)).toEqual({
      [ids[0]!]: { status: 'SENT', attempts: 0 },
      [ids[1]!]: { status: 'SENT', attempts: 0 },
      [ids[2]!]: { status: 'PENDING', attempts: 1 },
      [ids[3]!]: { status: 'PENDING', attempts: 0 },
      [ids[4]!]: { status: 'PENDING', attempts: 0 },
    });
  });

  test('a failing head holds its target back until its backoff is due; other targets go on', async () => {
    const { clock, ctx, log } = setup();
    const ids = await enqueue(clock, [ev('msg', 1), ev('msg', 2), ev('msg', 3), ev('tx:other', 4)]);
    const pub = new FakePublisher();
    pub.failIds.add(ids[0]!);

    const r1 = await dispatchOnce(ctx, [pub]);
    expect(r1.retried).toBe(1);
    expect(pub.delivered.map((r) => r.eventId)).toEqual([ids[3]]);
    let st = await statusOf(ids);
    expect(st[ids[0]!]).toEqual({ status: 'PENDING', attempts: 1 });
    expect(st[ids[1]!]).toEqual({ status: 'PENDING', attempts: 0 });
    expect(log.lines.some((l) => l.line.message === 'outbox_event_retry')).toBe(true);

    // Not due yet: nothing moves, not even the events behind the head.
    clock.advance(4_999);
    const r2 = await dispatchOnce(ctx, [pub]);
    expect(r2.targets.find((t) => t.target === 'msg')!.skipped).toBe('backoff');
    expect(pub.calls).toHaveLength(2);

    // Due: the head is retried alone first (a poison event is isolated), then the rest follows.
    pub.failIds.clear();
    clock.advance(1);
    await dispatchOnce(ctx, [pub]);
    expect(pub.calls[2]!.map((r) => r.eventId)).toEqual([ids[0]]);
    await dispatchOnce(ctx, [pub]);
    expect(pub.calls[3]!.map((r) => r.eventId)).toEqual([ids[1], ids[2]]);
    st = await statusOf(ids);
    expect(Object.values(st).map((s) => s.status)).toEqual(['SENT', 'SENT', 'SENT', 'SENT']);
  });

  test('backoff doubles from the initial value up to the cap', async () => {
    const { clock, ctx } = setup({
      MSGX_DELIVERY_MAX_RETRY_COUNT: '10',
      MSGX_DELIVERY_INITIAL_BACKOFF: '5s',
      MSGX_DELIVERY_MAX_BACKOFF: '30s',
    });
    await enqueue(clock, [ev('msg', 1)]);
    const pub = new FakePublisher();
    pub.mode = 'fail';
    await dispatchOnce(ctx, [pub]);
    // Judged by when the publisher is asked again: not a millisecond before each wait is over.
    for (const wait of [5_000, 10_000, 20_000, 30_000, 30_000]) {
      const calls = pub.calls.length;
      clock.advance(wait - 1);
      await dispatchOnce(ctx, [pub]);
      expect(pub.calls.length, `tried again before ${wait} ms`).toBe(calls);
      clock.advance(1);
      await dispatchOnce(ctx, [pub]);
      expect(pub.calls.length, `not tried again after ${wait} ms`).toBe(calls + 1);
    }
  });

  test('a poison event goes DEAD after the attempt limit, the target moves on, and the log goes quiet', async () => {
    const { clock, ctx, log } = setup({ MSGX_DELIVERY_MAX_RETRY_COUNT: '3' });
    const ids = await enqueue(clock, [ev('msg', 1, { sourceKind: 'txmsg', sourceId: 'tx-9' }), ev('msg', 2)]);
    const pub = new FakePublisher();
    pub.failIds.add(ids[0]!);
    const dead: SentEvent[] = [];
    const onDead = async (_tx: Queryable, evs: SentEvent[]) => {
      dead.push(...evs);
    };

    for (let i = 0; i < 3; i++) {
      await dispatchOnce(ctx, [pub], { onDead });
      clock.advance(5 * 60_000);
    }
    expect((await statusOf(ids))[ids[0]!]).toEqual({ status: 'DEAD', attempts: 3 });
    expect(dead).toEqual([{ eventId: ids[0], sourceKind: 'txmsg', sourceId: 'tx-9' }]);
    expect(log.lines.filter((l) => l.line.message === 'outbox_event_dead')).toHaveLength(1);

    await dispatchOnce(ctx, [pub], { onDead });
    expect((await statusOf(ids))[ids[1]!]!.status).toBe('SENT');

    // Nothing is left to do: rounds every second log nothing above debug.
    const before = log.lines.filter((l) => l.level !== 'debug').length;
    for (let i = 0; i < 10; i++) {
      clock.advance(1000);
      await dispatchOnce(ctx, [pub], { onDead });
    }
    expect(log.lines.filter((l) => l.level !== 'debug').length).toBe(before);

    const listed = await deadEvents(db, { target: 'msg' });
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ eventId: ids[0], attempts: 3, lastError: 'fake: broker said no' });
  });

  test('a failed batch charges only its first event; the rest go back to PENDING behind it', async () => {
    const { clock, ctx } = setup();
    const ids = await enqueue(clock, [ev('msg', 1), ev('msg', 2), ev('msg', 3)]);
    const pub = new FakePublisher();
    pub.mode = 'fail';
    await dispatchOnce(ctx, [pub]);
    const st = await statusOf(ids);
    expect(st[ids[0]!]).toEqual({ status: 'PENDING', attempts: 1 });
    expect(st[ids[1]!]).toEqual({ status: 'PENDING', attempts: 0 });
    expect(st[ids[2]!]).toEqual({ status: 'PENDING', attempts: 0 });
  });

  test('a publisher that hangs is cut at the publish deadline (the clock decides)', async () => {
    const { clock, ctx } = setup({ MSGX_DELIVERY_PUBLISH_TIMEOUT: '3s' });
    await enqueue(clock, [ev('msg', 1)]);
    const pub = new FakePublisher();
    pub.mode = 'hang';
    const round = dispatchOnce(ctx, [pub]);
    // Let the batch be read, then move time past the deadline.
    for (let i = 0; i < 50 && pub.calls.length === 0; i++) await new Promise((r) => setImmediate(r));
    expect(pub.calls).toHaveLength(1);
    clock.advance(3_000);
    const report = await round;
    expect(report.sent).toBe(0);
    // A publisher without a probe that times out is taken for away: the target waits, shown stalled.
    const [msg] = await pendingByTarget(db, clock.now());
    expect(msg!.headLastError).toMatch(/publish timeout after 3000ms/);
    expect(msg!.stalledSince).not.toBeNull();
  });

  test('onSent runs in the finishing transaction with the sent events (txmsg hook)', async () => {
    const { clock, ctx } = setup();
    const ids = await enqueue(clock, [
      ev('tx:orders', 1, { sourceKind: 'txmsg', sourceId: '42' }),
      ev('msg', 2, { sourceKind: 'proc', sourceId: '7' }),
    ]);
    const seen: SentEvent[] = [];
    const onSent = async (tx: Queryable, sent: SentEvent[]) => {
      // Inside the same transaction: the events already read as SENT here.
      const r = await tx.query<{ status: string }>(
        `SELECT msgx_event_state(status, target, event_id, writer_xid, now()) AS status FROM msg_event WHERE event_id = ANY($1)`,
        [sent.map((s) => s.eventId)],
      );
      expect(r.rows.every((x) => x.status === 'SENT')).toBe(true);
      seen.push(...sent);
    };
    await dispatchOnce(ctx, [new FakePublisher()], { onSent });
    expect(seen.sort((a, b) => a.eventId - b.eventId)).toEqual([
      { eventId: ids[0], sourceKind: 'txmsg', sourceId: '42' },
      { eventId: ids[1], sourceKind: 'proc', sourceId: '7' },
    ]);
  });

  test('a hook that throws rolls the finish back: the events are retried after the lease', async () => {
    const { clock, ctx } = setup();
    const [id] = await enqueue(clock, [ev('msg', 1)]);
    const pub = new FakePublisher();
    await dispatchOnce(ctx, [pub], {
      onSent: async () => {
        throw new Error('txmsg table is locked');
      },
    });
    expect((await statusOf([id!], clock.now()))[id!]!.status).toBe('DELIVERING');
    clock.advance(30_000);
    await dispatchOnce(ctx, [pub]);
    expect((await statusOf([id!]))[id!]!.status).toBe('SENT');
    expect(pub.delivered.map((r) => r.eventId)).toEqual([id, id]);
  });

  test('unknown targets fail like any other publish and end DEAD', async () => {
    const { clock, ctx } = setup({ MSGX_DELIVERY_MAX_RETRY_COUNT: '1' });
    const [id] = await enqueue(clock, [ev('bogus', 1)]);
    await dispatchOnce(ctx, [new FakePublisher()]);
    const dead = await deadEvents(db, { target: 'bogus' });
    expect(dead.map((e) => e.eventId)).toEqual([id]);
    expect(dead[0]!.lastError).toMatch(/unknown target bogus/);
  });
});

/** `db` as seen by a dispatcher that loses its database once `gone()` says so (killed, or cut off). */
function cutOff(gone: () => boolean): Db {
  return new Proxy(db, {
    get: (t, p) =>
      p === 'query' || p === 'tx'
        ? (...a: unknown[]) =>
            gone()
              ? Promise.reject(new Error('connection terminated'))
              : (Reflect.get(t, p) as (...a: unknown[]) => Promise<unknown>).apply(t, a)
        : Reflect.get(t, p),
  });
}

/** A publisher that takes every record, and calls `after` once it did. */
function takingThen(after: () => void): FakePublisher {
  const pub = new FakePublisher();
  const publish = pub.publish.bind(pub);
  pub.publish = async (records, signal) => {
    const r = await publish(records, signal);
    after();
    return r;
  };
  return pub;
}

describe('leases', () => {
  test("a killed dispatcher's lease holds the target while it lasts; then another takes the batch over", async () => {
    const { clock, ctx } = setup();
    const ids = await enqueue(clock, [ev('msg', 1), ev('msg', 2)]);
    // Killed right after its publish: the batch was handed over, the finish never happened.
    let killed = false;
    const first = takingThen(() => (killed = true));
    await dispatchOnce({ ...ctx, db: cutOff(() => killed) }, [first], { dispatcherId: 'a' });
    expect(Object.values(await statusOf(ids, clock.now())).map((s) => s.status)).toEqual(['DELIVERING', 'DELIVERING']);

    const pub = new FakePublisher();
    const r1 = await dispatchOnce(ctx, [pub], { dispatcherId: 'b' });
    expect(r1.targets[0]!.skipped).toBe('leased');
    expect(pub.calls).toHaveLength(0);

    clock.advance(30_000);
    await dispatchOnce(ctx, [pub], { dispatcherId: 'b' });
    expect(pub.delivered.map((r) => r.eventId)).toEqual(ids);
    expect(Object.values(await statusOf(ids, clock.now())).map((s) => s.status)).toEqual(['SENT', 'SENT']);
  });

  test('a dispatcher whose lease was taken over cannot overwrite the new owner', async () => {
    const { clock, ctx } = setup();
    const [id] = await enqueue(clock, [ev('msg', 1)]);
    const pub = new FakePublisher();
    pub.mode = 'hang';
    const slow = dispatchOnce(ctx, [pub], { dispatcherId: 'a' });
    for (let i = 0; i < 50 && pub.calls.length === 0; i++) await new Promise((r) => setImmediate(r));
    // Someone else takes the target over (as if a's lease had run out) while a still publishes.
    await db.query(`UPDATE outbox_target SET lease_owner = 'b' WHERE target = 'msg'`);
    clock.advance(3_000);
    const report = await slow;
    expect(report.targets[0]!.lostLease).toBe(1);
    expect((await statusOf([id!], clock.now()))[id!]).toEqual({ status: 'DELIVERING', attempts: 0 });
    expect((await pendingByTarget(db, clock.now()))[0]!.stalledSince).toBeNull();
  });

  test('publish confirmed but not recorded: redelivered after the lease with the same event id, in order', async () => {
    const { clock, ctx } = setup();
    const ids = await enqueue(clock, [ev('msg', 1), ev('msg', 2), ev('msg', 3)]);
    // The database goes away between publish and finish.
    let gone = false;
    const pub = takingThen(() => (gone = true));
    const r1 = await dispatchOnce({ ...ctx, db: cutOff(() => gone) }, [pub]);
    expect(r1.targets[0]!.skipped).toBe('error');
    expect(pub.delivered).toHaveLength(3);
    gone = false;

    clock.advance(30_000);
    await dispatchOnce(ctx, [pub]);
    const seen = pub.delivered.map((r) => r.headers['msgx-event-id']);
    expect(seen).toEqual([...ids, ...ids].map(String));
    // A consumer that drops repeated msgx-event-ids sees every event once, in order.
    const dedup = seen.filter((x, i) => seen.indexOf(x) === i);
    expect(dedup).toEqual(ids.map(String));
  });
});

describe('what a batch costs', () => {
  test('a batch without an event of hookSources is finished without the hooks and without a transaction', async () => {
    const { clock, ctx } = setup();
    let txs = 0;
    const countingDb = {
      kind: db.kind,
      query: db.query.bind(db),
      tx: ((fn: (q: Queryable) => Promise<unknown>) => (txs++, db.tx(fn))) as Db['tx'],
      listen: db.listen.bind(db),
      session: db.session.bind(db),
      close: async () => {},
    } as Db;
    const counting = { ...ctx, db: countingDb };
    const seen: SentEvent[] = [];
    const onSent = async (_tx: Queryable, sent: SentEvent[]) => {
      seen.push(...sent);
    };
    const plain = await enqueue(clock, [ev('msg', 1, { sourceKind: 'proc', sourceId: '7' }), ev('msg', 2)]);
    await dispatchOnce(counting, [new FakePublisher()], { onSent, hookSources: ['txmsg'] });
    expect(Object.values(await statusOf(plain)).map((s) => s.status)).toEqual(['SENT', 'SENT']);
    expect(seen).toEqual([]);
    expect(txs).toBe(0);

    // A batch with one transactional message: the hooks see the whole batch, in the finishing transaction.
    const mixed = await enqueue(clock, [ev('msg', 3), ev('msg', 4, { sourceKind: 'txmsg', sourceId: '42' })]);
    await dispatchOnce(counting, [new FakePublisher()], { onSent, hookSources: ['txmsg'] });
    expect(seen.map((e) => e.eventId)).toEqual(mixed);
    expect(txs).toBe(1);
  });

  test('an open event cannot carry sent_at or dead_at, nor a dead one lack dead_at: the indexes the relay reads rely on it', async () => {
    const { clock } = setup();
    const [id] = await enqueue(clock, [ev('msg', 1)]);
    await expect(db.query(`UPDATE msg_event SET sent_at = now() WHERE event_id = $1`, [id])).rejects.toThrow(/msg_event_open_unsettled/);
    await expect(db.query(`UPDATE msg_event SET status = 'DEAD' WHERE event_id = $1`, [id])).rejects.toThrow(/msg_event_dead_at_set/);
    await db.query(`UPDATE msg_event SET status = 'DEAD', dead_at = now() WHERE event_id = $1`, [id]);
    expect((await deadEvents(db)).map((e) => e.eventId)).toEqual([id]);
  });

  test("an event's delivery rows (kept from before the log) go with it when it is deleted", async () => {
    const { clock } = setup();
    const ids = await enqueue(clock, [ev('msg', 1), ev('msg', 2)]);
    await db.query(
      `INSERT INTO event_delivery (event_id, publisher, outcome, at) SELECT id, p, 'ok', now() FROM unnest($1::bigint[]) id, unnest($2::text[]) p`,
      [ids, ['kafka', 'webhook:http://x/']],
    );
    expect((await db.query(`SELECT * FROM event_delivery`)).rows).toHaveLength(4);
    await db.query(`DELETE FROM msg_event WHERE event_id = $1`, [ids[0]]);
    const left = await db.query<{ event_id: number }>(`SELECT event_id FROM event_delivery ORDER BY publisher`);
    expect(left.rows.map((r) => r.event_id)).toEqual([ids[1], ids[1]]);
  });
});

describe('fan-out', () => {
  test('SENT only when every publisher took it; a failed head retried skips the publishers that already took it', async () => {
    const { clock, ctx } = setup();
    const ids = await enqueue(clock, [ev('msg', 1), ev('msg', 2)]);
    const kafka = new FakePublisher('kafka');
    const hook = new FakePublisher('webhook:http://x/');
    hook.failIds.add(ids[0]!);

    await dispatchOnce(ctx, [kafka, hook]);
    // The first event is held until the hook takes it too; nothing overtakes it.
    expect(Object.values(await statusOf(ids)).map((s) => s.status)).toEqual(['PENDING', 'PENDING']);
    expect(hook.delivered).toEqual([]);

    hook.failIds.clear();
    clock.advance(5_000);
    await dispatchOnce(ctx, [kafka, hook]);
    await dispatchOnce(ctx, [kafka, hook]);
    expect(Object.values(await statusOf(ids)).map((s) => s.status)).toEqual(['SENT', 'SENT']);
    // The failed head is not sent to kafka again; the event behind it is (at least once, same msgx-event-id).
    expect(kafka.delivered.map((r) => r.eventId)).toEqual([ids[0], ids[1], ids[1]]);
    expect(hook.delivered.map((r) => r.eventId)).toEqual(ids);
  });
});

describe('schd aggregation', () => {
  const schd = (flid: string, version: number, value: unknown = { FLID: flid, v: version }): NewEvent => ({
    target: 'schd',
    key: flid,
    flid,
    stateVersion: version,
    type: value === null ? 'TOMBSTONE' : 'UPSERT',
    value,
  });

  test('only the newest state_version per FLID is sent; the older ones go out with it', async () => {
    const { clock, ctx } = setup();
    const ids = await enqueue(clock, [schd('A', 1), schd('B', 1), schd('A', 2), schd('A', 3), schd('B', 2, null)]);
    const pub = new FakePublisher('kafka');
    await dispatchOnce(ctx, [pub]);
    expect(pub.calls).toHaveLength(1);
    const sent = pub.calls[0]!;
    expect(sent.map((r) => [r.key, r.value])).toEqual([
      ['A', '{"FLID":"A","v":3}'],
      ['B', null],
    ]);
    expect(sent[0]!.topic).toBe('msgx.schd');
    expect(Object.values(await statusOf(ids)).map((s) => s.status)).toEqual(['SENT', 'SENT', 'SENT', 'SENT', 'SENT']);
  });

  test('at most the flush limit per flush; a full flush lets the next follow at once, one that is not full waits a period', async () => {
    const { clock, ctx } = setup({ MSGX_SCHD_FLUSH_PERIOD: '3s', MSGX_SCHD_FLUSH_LIMIT: '2' });
    await enqueue(clock, [schd('A', 1), schd('B', 1), schd('C', 1)]);
    const pub = new FakePublisher();
    const full = await dispatchOnce(ctx, [pub]);
    expect(pub.delivered.map((r) => r.key)).toEqual(['A', 'B']);
    expect(full.more).toBe(true);

    // The backlog behind a full flush has waited already: no period before the next flush.
    const rest = await dispatchOnce(ctx, [pub]);
    expect(pub.delivered.map((r) => r.key)).toEqual(['A', 'B', 'C']);
    expect(rest.more).toBe(false);

    await enqueue(clock, [schd('A', 2)]);
    clock.advance(2_999);
    const r = await dispatchOnce(ctx, [pub]);
    expect(r.targets[0]!.skipped).toBe('flush-period');
    clock.advance(1);
    await dispatchOnce(ctx, [pub]);
    expect(pub.delivered.map((r) => r.key)).toEqual(['A', 'B', 'C', 'A']);
  });

  test('a failed flush backs off per FLID; the newer versions wait behind the failed one and follow it', async () => {
    const { clock, ctx } = setup({ MSGX_SCHD_FLUSH_PERIOD: '1s' });
    const ids = await enqueue(clock, [schd('A', 1), schd('A', 2)]);
    const pub = new FakePublisher();
    pub.mode = 'fail';
    await dispatchOnce(ctx, [pub]);
    // The older version is superseded by the newest, which alone is charged and retried.
    expect(await statusOf(ids)).toEqual({ [ids[0]!]: { status: 'SENT', attempts: 0 }, [ids[1]!]: { status: 'PENDING', attempts: 1 } });

    // A newer version arrives while A backs off: it waits behind the failed one until its backoff is over.
    const [v3] = await enqueue(clock, [schd('A', 3)]);
    pub.mode = 'ok';
    clock.advance(1_000);
    await dispatchOnce(ctx, [pub]);
    expect(pub.delivered).toEqual([]);
    clock.advance(4_000);
    for (let i = 0; i < 3; i++, clock.advance(1_000)) await dispatchOnce(ctx, [pub]);
    // The failed version first, then the newer one: the compacted topic ends at the newest state.
    expect(pub.delivered.map((r) => r.eventId)).toEqual([ids[1], v3]);
    expect(Object.values(await statusOf([...ids, v3!])).map((s) => s.status)).toEqual(['SENT', 'SENT', 'SENT']);
  });
});

describe('replay', () => {
  test('DEAD events go back to PENDING with their event_id, audited; a dry run changes nothing', async () => {
    const { clock, ctx } = setup({ MSGX_DELIVERY_MAX_RETRY_COUNT: '1' });
    const ids = await enqueue(clock, [ev('msg', 1), ev('msg', 2)]);
    const pub = new FakePublisher();
    pub.mode = 'fail';
    await dispatchOnce(ctx, [pub]);
    await dispatchOnce(ctx, [pub]);
    expect(Object.values(await statusOf(ids)).map((s) => s.status)).toEqual(['DEAD', 'DEAD']);

    const dry = await replayDeadEvents(db, { target: 'msg', dryRun: true, actor: 'ops' }, { now: clock.now() });
    expect(dry).toEqual({ dryRun: true, replayed: ids, skipped: [] });
    expect(Object.values(await statusOf(ids)).map((s) => s.status)).toEqual(['DEAD', 'DEAD']);
    expect((await db.query(`SELECT * FROM audit_log`)).rows).toHaveLength(0);

    const res = await replayDeadEvents(db, { ids: [ids[0]!, 999], actor: 'ops' }, { now: clock.now() });
    expect(res.replayed).toEqual([ids[0]]);
    expect(res.skipped).toEqual([{ eventId: 999, reason: 'no such event' }]);
    const audit = await db.query<{ actor: string; action: string; detail: { replayed: number[] } }>(`SELECT * FROM audit_log`);
    expect(audit.rows).toHaveLength(1);
    expect(audit.rows[0]).toMatchObject({ actor: 'ops', action: 'outbox.replay' });
    expect(audit.rows[0]!.detail.replayed).toEqual([ids[0]]);

    pub.mode = 'ok';
    await dispatchOnce(ctx, [pub]);
    expect(pub.delivered.map((r) => r.eventId)).toEqual([ids[0]]);
    expect(pub.delivered[0]!.headers['msgx-event-id']).toBe(String(ids[0]));
  });

  test('replay by target finds its dead events however many events it sent before them', async () => {
    const { clock, ctx } = setup({ MSGX_DELIVERY_MAX_RETRY_COUNT: '1' });
    const sent = await enqueue(
      clock,
      Array.from({ length: 5 }, (_, i) => ev('msg', i)),
    );
    const pub = new FakePublisher();
    await dispatchOnce(ctx, [pub]);
    const [dead] = await enqueue(clock, [ev('msg', 9)]);
    pub.mode = 'fail';
    await dispatchOnce(ctx, [pub]);
    expect((await statusOf([...sent, dead!]))[dead!]!.status).toBe('DEAD');
    // A limit smaller than the target's history: the sent events must not use it up.
    const res = await replayDeadEvents(db, { target: 'msg', limit: 2 }, { now: clock.now() });
    expect(res.replayed).toEqual([dead]);
  });

  test('a schd version older than one already sent is not replayed', async () => {
    const { clock, ctx } = setup({ MSGX_DELIVERY_MAX_RETRY_COUNT: '1', MSGX_SCHD_FLUSH_PERIOD: '1s' });
    const [v1] = await enqueueEvents(db, [{ target: 'schd', key: 'A', flid: 'A', stateVersion: 1, type: 'UPSERT', value: {} }], {
      now: clock.now(),
    });
    const pub = new FakePublisher();
    pub.mode = 'fail';
    await dispatchOnce(ctx, [pub]);
    pub.mode = 'ok';
    await enqueueEvents(db, [{ target: 'schd', key: 'A', flid: 'A', stateVersion: 2, type: 'UPSERT', value: {} }], { now: clock.now() });
    clock.advance(1_000);
    await dispatchOnce(ctx, [pub]);
    const res = await replayDeadEvents(db, { ids: [v1!] }, { now: clock.now() });
    expect(res.replayed).toEqual([]);
    expect(res.skipped[0]!.reason).toMatch(/superseded/);
  });
});

describe('stats and metrics', () => {
  test('pendingByTarget gives count, head and age per target; metrics get one report per round', async () => {
    const { clock, ctx } = setup();
    await enqueue(clock, [ev('msg', 1), ev('msg', 2)]);
    clock.advance(90_000);
    await enqueue(clock, [ev('tx:a', 3)]);
    clock.advance(10_000);
    const stats = await pendingByTarget(db, clock.now());
    expect(stats.map((s) => [s.target, s.pending, s.oldestAgeSeconds])).toEqual([
      ['msg', 2, 100],
      ['tx:a', 1, 10],
    ]);

    const rounds: number[] = [];
    const metrics: OutboxMetrics = {
      recordRound: (r) => rounds.push(r.sent),
      recordGauges() {},
      flush() {},
    };
    const report = await dispatchOnce(ctx, [new FakePublisher()], { metrics });
    expect(rounds).toEqual([3]);
    expect(report.targets.find((t) => t.target === 'msg')!.oldestPendingSeconds).toBe(100);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
  });

  test('the round log line carries the time of each stage', async () => {
    const { clock, ctx, log } = setup();
    await enqueue(clock, [ev('msg', 1)]);
    await dispatchOnce(ctx, [new FakePublisher('kafka')]);
    const line = log.lines.find((l) => l.line.message === 'outbox_dispatch_timing')!;
    expect(line.level).toBe('info');
    const t = (line.line.targets as Record<string, unknown>[])[0]!;
    expect(t).toMatchObject({ target: 'msg', claimed: 1, sent: 1 });
    expect(Object.keys(t.publish_ms as object)).toEqual(['kafka']);
    expect(typeof t.claim_ms).toBe('number');
    expect(typeof t.mark_ms).toBe('number');
  });
});
