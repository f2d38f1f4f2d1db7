import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { loadConfig, type Config } from '../../lib/config/config.ts';
import { migrate } from '../../lib/db/migrate.ts';
import { PgliteDb } from '../../lib/db/pglite.ts';
import type { Queryable } from '../../lib/db/db.ts';
import { dispatchOnce, type DispatchContext, type SentEvent } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents, type NewEvent } from '../../lib/outbox/enqueue.ts';
import { replayDeadEvents } from '../../lib/outbox/replay.ts';
import { deadEvents, pendingByTarget } from '../../lib/outbox/queries.ts';
import { READ_AHEAD_SQL } from '../../lib/outbox/logLease.ts';
import { FINISH_SQL } from '../../lib/outbox/logBatch.ts';
import { eventsBySource } from '../../lib/outbox/sourceEvents.ts';
import type { OutRecord, Publisher, PublishResult } from '../../lib/outbox/types.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { FakePublisher, memoryLog } from '../helpers/kafka.ts';

// The dispatcher reading the outbox as a log. Judged by what the publishers
// received and by what the admin queries (/admin/stats, /admin/dead, the trace) show; the tables are
// read only to prove that the relay does not write the events (their row versions stay the same).
// Embedded PostgreSQL, a fake clock, no sleeps.

let db: PgliteDb;
beforeAll(async () => {
  db = await PgliteDb.open();
  await migrate(db);
}, 180_000);
afterAll(async () => {
  await db?.close();
});
beforeEach(async () => {
  await db.query(`TRUNCATE msg_event, event_delivery, outbox_target, outbox_exception, audit_log RESTART IDENTITY CASCADE`);
});

function setup(env: Record<string, string> = {}) {
  const clock = new FakeClock('2026-11-29T00:00:00Z');
  const config: Config = loadConfig({
    MSGX_DELIVERY_BATCH_SIZE: '100',
    MSGX_DELIVERY_MAX_RETRY_COUNT: '3',
    MSGX_DELIVERY_INITIAL_BACKOFF: '5s',
    MSGX_DELIVERY_MAX_BACKOFF: '5m',
    MSGX_DELIVERY_LEASE: '30s',
    ...env,
  });
  const ctx: DispatchContext = { db, config, clock, log: memoryLog() };
  return { clock, ctx };
}

const ev = (target: string, key: string, n: number, extra: Partial<NewEvent> = {}): NewEvent => ({
  target,
  key,
  type: 'FLIGHT_UPDATED',
  value: { n },
  ...extra,
});

const enqueue = (clock: FakeClock, events: NewEvent[]) => enqueueEvents(db, events, { now: clock.now() });
const ids = (rs: OutRecord[]) => rs.map((r) => r.eventId);
const perKey = (rs: OutRecord[]) => {
  const m: Record<string, number[]> = {};
  for (const r of rs) (m[r.key ?? ''] ??= []).push(r.eventId);
  return m;
};

/** A destination that is away: every record fails as an outage while `down`. */
class AwayPublisher implements Publisher {
  down = true;
  readonly delivered: OutRecord[] = [];
  constructor(readonly name = 'away') {}
  async publish(records: OutRecord[]): Promise<PublishResult[]> {
    if (this.down) return records.map(() => ({ ok: false as const, error: 'connect ECONNREFUSED 127.0.0.1:9', unavailable: true }));
    this.delivered.push(...records);
    return records.map(() => ({ ok: true as const }));
  }
  async close(): Promise<void> {}
}

describe('the log relay', () => {
  test('fan-out: every publisher gets every event in event_id order; the events are never written again', async () => {
    const { clock, ctx } = setup({ MSGX_DELIVERY_BATCH_SIZE: '3' });
    const written = await enqueue(
      clock,
      [1, 2, 3, 4, 5, 6, 7].map((n) => ev('msg', `F${n % 3}`, n)),
    );
    const before = await db.query<{ event_id: number; v: string }>(`SELECT event_id, xmin::text AS v FROM msg_event ORDER BY event_id`);
    const a = new FakePublisher('kafka');
    const b = new FakePublisher('hook');
    const r = await dispatchOnce(ctx, [a, b], { maxBatches: 10 });
    expect(r.sent).toBe(7);
    expect(ids(a.delivered)).toEqual(written);
    expect(ids(b.delivered)).toEqual(written);
    // Three batches of at most 3 (the batch size): one publish call each.
    expect(a.calls.map((c) => c.length)).toEqual([3, 3, 1]);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
    const after = await db.query<{ event_id: number; v: string }>(`SELECT event_id, xmin::text AS v FROM msg_event ORDER BY event_id`);
    expect(after.rows).toEqual(before.rows);
    expect((await db.query(`SELECT 1 FROM event_delivery`)).rows).toHaveLength(0);
    // Nothing again on the next round.
    await dispatchOnce(ctx, [a, b]);
    expect(a.delivered).toHaveLength(7);
  });

  test('a failing event holds its target (nothing overtakes it); after its backoff it and the events behind it go out in order', async () => {
    const { clock, ctx } = setup();
    const w = await enqueue(clock, [ev('msg', 'B', 1), ev('msg', 'A', 2), ev('msg', 'B', 3), ev('msg', 'C', 4)]);
    const pub = new FakePublisher();
    pub.failIds.add(w[1]!);
    await dispatchOnce(ctx, [pub], { maxBatches: 10 });
    expect(ids(pub.delivered)).toEqual([w[0]]);
    const [stats] = await pendingByTarget(db, clock.now());
    expect(stats).toMatchObject({ target: 'msg', pending: 3, headEventId: w[1], headAttempts: 1, headLastError: 'fake: broker said no' });
    expect(stats!.stalledSince).toBeNull();
    // Still backing off (5 s): nothing moves, whatever arrives.
    pub.failIds.clear();
    clock.advance(4_000);
    const later = await enqueue(clock, [ev('msg', 'D', 5)]);
    await dispatchOnce(ctx, [pub], { maxBatches: 10 });
    expect(pub.delivered).toHaveLength(1);
    clock.advance(1_000);
    await dispatchOnce(ctx, [pub], { maxBatches: 10 });
    expect(ids(pub.delivered)).toEqual([...w, ...later]);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
  });

  test('schd: a failed flight holds no other; its later versions wait behind it', async () => {
    const { clock, ctx } = setup();
    const v = (flid: string, version: number) => ev('schd', flid, version, { flid, stateVersion: version, type: 'UPSERT' });
    const w = await enqueue(clock, [v('F1', 1), v('F2', 1)]);
    const pub = new FakePublisher();
    pub.error = 'MESSAGE_TOO_LARGE';
    pub.failIds.add(w[0]!);
    await dispatchOnce(ctx, [pub]);
    expect(perKey(pub.delivered)).toEqual({});
    // The fake refuses the rest of a publish after a failure: F2 was not tried and goes next flush.
    clock.advance(3_000);
    await dispatchOnce(ctx, [pub]);
    expect(perKey(pub.delivered)).toEqual({ F2: [w[1]] });
    const more = await enqueue(clock, [v('F1', 2), v('F2', 2)]);
    pub.failIds.clear();
    clock.advance(3_000);
    await dispatchOnce(ctx, [pub]);
    expect(perKey(pub.delivered)).toEqual({ F1: [w[0], more[0]], F2: [w[1], more[1]] });
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
  });

  test('after the attempt limit the event is DEAD and the events of its key go on; replay keeps its event_id', async () => {
    const { clock, ctx } = setup();
    const w = await enqueue(clock, [ev('msg', 'A', 1), ev('msg', 'A', 2)]);
    const pub = new FakePublisher();
    pub.failIds.add(w[0]!);
    for (let i = 0; i < 3; i++) {
      await dispatchOnce(ctx, [pub]);
      clock.advance(300_000);
    }
    const dead = await deadEvents(db);
    expect(dead.map((d) => [d.eventId, d.attempts, d.lastError])).toEqual([[w[0], 3, 'fake: broker said no']]);
    await dispatchOnce(ctx, [pub]);
    expect(ids(pub.delivered)).toEqual([w[1]]);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);

    pub.failIds.clear();
    const rep = await replayDeadEvents(db, { target: 'msg' }, { now: clock.now() });
    expect(rep.replayed).toEqual([w[0]]);
    expect(await deadEvents(db)).toEqual([]);
    expect((await pendingByTarget(db, clock.now()))[0]).toMatchObject({ pending: 1, headEventId: w[0], headAttempts: 0 });
    await dispatchOnce(ctx, [pub]);
    expect(ids(pub.delivered)).toEqual([w[1], w[0]]);
    expect(pub.delivered[1]!.headers['msgx-event-id']).toBe(String(w[0]));
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
  });

  test('a killed dispatcher: its open batch shows DELIVERING, is held by its lease, and is taken over once the lease expired', async () => {
    const { clock, ctx } = setup();
    const w = await enqueue(clock, [ev('msg', 'A', 1), ev('msg', 'B', 2)]);
    // What a dispatcher leaves when it dies between reading its batch and finishing it.
    await db.query(
      `INSERT INTO outbox_target (target, snap_lo, snap_hi, lease_owner, lease_until)
       VALUES ('msg', msgx_outbox_origin(), pg_current_snapshot(), 'killed', $1)`,
      [new Date(clock.now().getTime() + 30_000)],
    );
    expect((await pendingByTarget(db, clock.now()))[0]).toMatchObject({ pending: 0, delivering: 2 });
    const pub = new FakePublisher();
    const held = await dispatchOnce(ctx, [pub], { dispatcherId: 'b' });
    expect(held.targets[0]!.skipped).toBe('leased');
    expect(pub.delivered).toHaveLength(0);
    clock.advance(30_000);
    expect((await pendingByTarget(db, clock.now()))[0]).toMatchObject({ pending: 2, delivering: 0 });
    await dispatchOnce(ctx, [pub], { dispatcherId: 'b' });
    expect(ids(pub.delivered)).toEqual(w);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
  });

  test('an outage charges nobody: the target shows stalled with the reason and goes on once the destination is back', async () => {
    const { clock, ctx } = setup();
    const w = await enqueue(clock, [ev('msg', 'A', 1), ev('msg', 'B', 2)]);
    const pub = new AwayPublisher();
    for (let i = 0; i < 5; i++) {
      await dispatchOnce(ctx, [pub]);
      clock.advance(5_000);
    }
    const [s] = await pendingByTarget(db, clock.now());
    expect(s).toMatchObject({ pending: 2, headEventId: w[0], headAttempts: 0, headLastError: 'away: connect ECONNREFUSED 127.0.0.1:9' });
    expect(s!.stalledSince).not.toBeNull();
    expect(await deadEvents(db)).toEqual([]);
    pub.down = false;
    await dispatchOnce(ctx, [pub]);
    expect(ids(pub.delivered)).toEqual(w);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
  });

  test('hooks run in the finishing transaction; a hook that throws leaves the batch to be taken again after its lease', async () => {
    const { clock, ctx } = setup();
    const w = await enqueue(clock, [
      ev('tx:orders', 'o1', 1, { sourceKind: 'txmsg', sourceId: '42' }),
      ev('tx:orders', 'o2', 2, { sourceKind: 'external', sourceId: 'x' }),
    ]);
    const pub = new FakePublisher();
    let fail = true;
    const seen: SentEvent[] = [];
    const onSent = async (tx: Queryable, sent: SentEvent[]) => {
      // Inside the transaction that moves the cursor: the events already read SENT there.
      const r = await tx.query<{ s: string }>(
        `SELECT msgx_event_state(status, target, event_id, writer_xid, now()) AS s FROM msg_event WHERE event_id = ANY($1)`,
        [sent.map((x) => x.eventId)],
      );
      expect(r.rows.map((x) => x.s)).toEqual(['SENT', 'SENT']);
      if (fail) throw new Error('tx_message is locked');
      seen.push(...sent);
    };
    await dispatchOnce(ctx, [pub], { onSent, hookSources: ['txmsg'] });
    expect((await pendingByTarget(db, clock.now()))[0]).toMatchObject({ target: 'tx:orders', pending: 0, delivering: 2 });
    fail = false;
    clock.advance(30_000);
    await dispatchOnce(ctx, [pub], { onSent, hookSources: ['txmsg'] });
    expect(ids(pub.delivered)).toEqual([...w, ...w]);
    expect(seen).toEqual([
      { eventId: w[0], sourceKind: 'txmsg', sourceId: '42' },
      { eventId: w[1], sourceKind: 'external', sourceId: 'x' },
    ]);
    expect((await eventsBySource(db, 'txmsg', '42')).map((e) => e.status)).toEqual(['SENT']);
  });

  test('schd: one flush sends the newest version of each flight, a tombstone included', async () => {
    const { clock, ctx } = setup();
    const v = (flid: string, version: number, value: unknown, type = 'UPSERT') =>
      ev('schd', flid, version, { flid, stateVersion: version, value: value as never, type });
    await enqueue(clock, [v('F1', 1, { s: 1 }), v('F2', 1, { s: 1 }), v('F1', 2, { s: 2 }), v('F2', 2, null, 'TOMBSTONE')]);
    const pub = new FakePublisher();
    await dispatchOnce(ctx, [pub]);
    expect(pub.delivered.map((r) => [r.key, r.type, r.value])).toEqual([
      ['F1', 'UPSERT', '{"s":2}'],
      ['F2', 'TOMBSTONE', null],
    ]);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
    // The period holds the next flush back.
    await enqueue(clock, [v('F1', 3, { s: 3 })]);
    await dispatchOnce(ctx, [pub]);
    expect(pub.delivered).toHaveLength(2);
    clock.advance(3_000);
    await dispatchOnce(ctx, [pub]);
    expect(pub.delivered.map((r) => r.value).at(-1)).toBe('{"s":3}');
  });
  test('pages read ahead: a page that fails while the next was already read keeps order and loses nothing', async () => {
    // Batches of 3, 40 per round: pages of 30 events, each read while the one before is published.
    const { clock, ctx } = setup({ MSGX_DELIVERY_BATCH_SIZE: '3' });
    const aheads: Promise<unknown>[] = [];
    const spied = new Proxy(db, {
      get(t, k) {
        if (k === 'query')
          return (sql: string, params?: unknown[]) => {
            const q = t.query(sql, params);
            if (sql === READ_AHEAD_SQL) aheads.push(q);
            return q;
          };
        const v: unknown = Reflect.get(t, k);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
    const sctx: DispatchContext = { ...ctx, db: spied };
    const w = await enqueue(
      clock,
      Array.from({ length: 75 }, (_, i) => ev('msg', `K${i % 4}`, i)),
    );
    // A failure answers only once the page after it was read: the relay has it in hand when it fails.
    class SlowToFail extends FakePublisher {
      override async publish(records: OutRecord[], signal: AbortSignal): Promise<PublishResult[]> {
        if (records.some((r) => this.failIds.has(r.eventId))) {
          expect(aheads.length).toBeGreaterThan(0);
          await Promise.all(aheads);
        }
        return super.publish(records, signal);
      }
    }
    const pub = new SlowToFail();
    const reference = new FakePublisher('reference');
    // Page 1 fails in its fifth batch, while page 2 was read.
    pub.failIds.add(w[13]!);
    await dispatchOnce(sctx, [pub, reference], { maxBatches: 40 });
    expect(ids(pub.delivered)).toEqual(w.slice(0, 13));
    expect(aheads).toHaveLength(1);
    // Its retry goes alone; the page from the cursor (14–43) passes and the one read ahead behind it
    // (44–73) fails while the page after it was read ahead in turn.
    pub.failIds.clear();
    pub.failIds.add(w[50]!);
    clock.advance(5_000);
    await dispatchOnce(sctx, [pub, reference], { maxBatches: 40 });
    expect(ids(pub.delivered)).toEqual(w.slice(0, 50));
    expect(aheads).toHaveLength(3);
    pub.failIds.clear();
    clock.advance(5_000);
    await dispatchOnce(sctx, [pub, reference], { maxBatches: 40 });
    // Every event once, in event_id order (so in order per key), nothing lost behind the dropped pages.
    expect(ids(pub.delivered)).toEqual(w);
    // The other publisher took the events behind each failure in its batch (sent again after it,
    // at least once): each first seen in order.
    expect([...new Set(ids(reference.delivered))]).toEqual(w);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
  });
  test('a page finishes while the next publishes: a lease lost in that finish loses nothing, the next owner sends again', async () => {
    // Batches of 3, 40 per round: pages of 30. Page 1's finish finds the lease taken (its owner was
    // presumed dead) while page 2, read ahead, is already being published.
    const { clock, ctx } = setup({ MSGX_DELIVERY_BATCH_SIZE: '3' });
    let finishes = 0;
    const spied = new Proxy(db, {
      get(t, k) {
        if (k === 'query')
          return async (sql: string, params?: unknown[]) => {
            if (sql === FINISH_SQL && ++finishes === 1)
              await t.query(`UPDATE outbox_target SET lease_owner = 'thief', lease_until = $1 WHERE target = 'msg'`, [
                new Date(clock.now().getTime() + 30_000),
              ]);
            return t.query(sql, params);
          };
        const v: unknown = Reflect.get(t, k);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
    const w = await enqueue(
      clock,
      Array.from({ length: 75 }, (_, i) => ev('msg', `K${i % 4}`, i)),
    );
    const pub = new FakePublisher();
    const first = await dispatchOnce({ ...ctx, db: spied }, [pub], { maxBatches: 40 });
    // Page 2 went out behind page 1 before the lost finish was known; neither is finished.
    expect(ids(pub.delivered)).toEqual(w.slice(0, 60));
    expect(first.targets.find((t) => t.target === 'msg')?.lostLease).toBe(60);
    const open = (await pendingByTarget(db, clock.now())).find((p) => p.target === 'msg');
    expect(Number(open?.pending) + Number(open?.delivering)).toBe(75);
    // The thief never finishes; once its lease expires, the cursor's events go again, the same ids.
    clock.advance(31_000);
    await dispatchOnce(ctx, [pub], { maxBatches: 40 });
    expect(ids(pub.delivered).slice(60)).toEqual(w);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
  });
});
