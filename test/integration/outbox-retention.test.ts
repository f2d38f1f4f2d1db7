import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../lib/app/context.ts';
import { loadConfig } from '../../lib/config/config.ts';
import type { Queryable } from '../../lib/db/db.ts';
import { registerFlightProcessors } from '../../lib/flights/processors.ts';
import { buildRouter } from '../../lib/http/app.ts';
import type { HttpRequest } from '../../lib/http/types.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import type { MessageTrace } from '../../lib/observability/trace.ts';
import { dispatchOnce } from '../../lib/outbox/dispatcher.ts';
import { sweepDeliveredEvents } from '../../lib/outbox/retention.ts';
import type { OutRecord, Publisher, PublishResult } from '../../lib/outbox/types.ts';
import { ProcessorRegistry } from '../../lib/pipeline/processor.ts';
import { ConfigError } from '../../lib/shared/errors.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { drainPoller, drainPump, makeContext, wire } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

const DAY = 86_400_000;

/** Accepts every record except those keyed 'dead', which it refuses (one attempt: they go DEAD). */
class Sink implements Publisher {
  readonly name = 'kafka';
  keys: (string | null)[] = [];
  async publish(records: OutRecord[]): Promise<PublishResult[]> {
    return records.map((r) => {
      if (r.key === 'dead') return { ok: false, error: 'refused' };
      this.keys.push(r.key ?? null);
      return { ok: true, partition: 0, offset: this.keys.length };
    });
  }
  async close() {}
}

/** A Queryable that records every statement, to count what the sweep issues. */
function counting(db: Queryable): Queryable & { statements: string[] } {
  const statements: string[] = [];
  return {
    statements,
    query: (sql, params) => {
      statements.push(sql);
      return db.query(sql, params);
    },
  };
}

const flight = (flid: string) =>
  `<FLIGHT><FLID>${flid}</FLID><OPDY>20261129</OPDY><AWCD>CZ</AWCD><FLNO>${flid}</FLNO><SOBT>20261129101500</SOBT><STAT>SCH</STAT></FLIGHT>`;

describe('event retention: delivered events below one cut go by range', () => {
  let pg: TestPg;
  let ctx: AppContext;
  const T = new Date('2026-11-29T08:00:00Z');
  const clock = new FakeClock(T);
  const sink = new Sink();
  const router = buildRouter();
  let msgId = 0;
  let traceBefore: number[] = [];

  const trace = async (id: number) => {
    const req: HttpRequest = { method: 'GET', path: `/admin/trace/${id}`, headers: {}, query: {}, body: '', params: {}, isAdmin: true };
    return (await router.handle(req, ctx)).body as MessageTrace;
  };
  /** Plain INSERTs as any service writes them; created_at set to `at`. Returns the new ids. */
  const insert = async (target: string, key: string, n: number, at: Date): Promise<number[]> => {
    const r = await pg.db.query<{ event_id: string }>(
      `INSERT INTO msg_event (target, partition_key, event_type, value, created_at)
       SELECT $1, $2, 'TEST', 'v' || g, $4 FROM generate_series(1, $3) g RETURNING event_id`,
      [target, key, n, at],
    );
    return r.rows.map((x) => Number(x.event_id)).sort((a, b) => a - b);
  };
  const deliver = async (targets?: string[]) => {
    for (let i = 0; i < 4; i++) {
      await dispatchOnce(ctx, [sink], targets ? { targets } : {});
      clock.advance(60_000);
    }
  };
  const present = async (ids: number[]): Promise<number[]> =>
    (
      await pg.db.query<{ event_id: string }>(`SELECT event_id FROM msg_event WHERE event_id = ANY($1::bigint[]) ORDER BY 1`, [ids])
    ).rows.map((r) => Number(r.event_id));

  const old = new Date(T.getTime() - 40 * DAY);
  const ids: Record<string, number[]> = {};

  beforeAll(async () => {
    pg = await freshPg();
    const mailbox = new PgMailbox(pg.db);
    await mailbox.ensureTables();
    ctx = makeContext({
      db: pg.db,
      mailbox,
      clock,
      registry: registerFlightProcessors(new ProcessorRegistry()),
      env: { MSGX_DELIVERY_MAX_RETRY_COUNT: '1', MSGX_DELIVERY_INITIAL_BACKOFF: '1s' },
    });
    // Forty days old, in id order: delivered, one dead, delivered, one never delivered (its target
    // is not dispatched yet), delivered behind it.
    ids.bulk1 = await insert('msg', 'a', 200, old);
    ids.dead = await insert('msg', 'dead', 1, old);
    ids.bulk2 = await insert('msg', 'b', 20, old);
    ids.open = await insert('tx:retention.held', 'h', 1, old);
    ids.bulk3 = await insert('msg', 'c', 30, old);
    // A message processed now: its events are inside every window.
    msgId = await mailbox.insertInbound(
      wire({ TYPE: 'SCHD', STYP: 'DNLD', SEQN: 1 }, `<SCHD><OPDY>20261129</OPDY><CNT>2</CNT>${flight('1001')}${flight('1002')}</SCHD>`),
    );
    await drainPoller(ctx);
    await drainPump(ctx);
    await pg.db.query(`UPDATE msg_event SET created_at = $1 WHERE source_kind = 'proc'`, [T]);
    await deliver(['msg', 'schd']);
    traceBefore = (await trace(msgId)).events.map((e) => e.eventId);
  });
  afterAll(() => pg.drop());

  it('the setting: 30 days by default, refused below MSGX_PROC_RETENTION_DAYS', () => {
    expect(loadConfig({ MSGX_RUNTIME: 'twin' }).lifecycle.eventRetentionDays).toBe(30);
    expect(loadConfig({ MSGX_RUNTIME: 'twin', MSGX_EVENT_RETENTION_DAYS: '45' }).lifecycle.eventRetentionDays).toBe(45);
    const bad = () => loadConfig({ MSGX_RUNTIME: 'twin', MSGX_EVENT_RETENTION_DAYS: '7' });
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/MSGX_EVENT_RETENTION_DAYS.*MSGX_PROC_RETENTION_DAYS/);
    expect(() => loadConfig({ MSGX_RUNTIME: 'twin', MSGX_EVENT_RETENTION_DAYS: '7', MSGX_PROC_RETENTION_DAYS: '5' })).not.toThrow();
  });

  it('old delivered events go up to the first open one; dead, open and later events stay; O(chunks) statements', async () => {
    expect(traceBefore.length).toBeGreaterThan(0);
    const db = counting(pg.db);
    const r = await sweepDeliveredEvents(db, { now: clock.now(), retentionDays: 30, chunk: 50 });
    expect(r.cut).toBe(ids.open![0]);
    expect(await present([...ids.bulk1!, ...ids.bulk2!])).toEqual([]);
    expect(await present([...ids.dead!, ...ids.open!, ...ids.bulk3!])).toEqual([...ids.dead!, ...ids.open!, ...ids.bulk3!]);
    expect(r.deleted).toBe(220);
    // 221 ids from the first delivered event to the cut, 50 per statement: 5 deletes, one bound query.
    const deletes = db.statements.filter((s) => /DELETE FROM msg_event/.test(s));
    expect(deletes).toHaveLength(Math.ceil((ids.open![0]! - ids.bulk1![0]!) / 50));
    expect(db.statements).toHaveLength(deletes.length + 1);
    const st = await pg.db.query<{ event_id: number }>(`SELECT target, event_id FROM msgx_outbox_dead()`);
    expect(st.rows.map((x) => Number(x.event_id))).toEqual(ids.dead);
    // The batches' outcome rows go with their events, in the same statements: those wholly below the cut.
    const batches = await pg.db.query<{ below: number; above: number }>(
      `SELECT count(*) FILTER (WHERE hi_id < $1)::int AS below, count(*) FILTER (WHERE hi_id >= $1)::int AS above FROM outbox_batch`,
      [r.cut],
    );
    expect(batches.rows[0]).toEqual({ below: 0, above: expect.any(Number) });
    expect(batches.rows[0]!.above).toBeGreaterThan(0);
  });

  it('once the held event is delivered, the old ones go; the window and a traceable message keep theirs; the relay goes on', async () => {
    await deliver();
    ids.after = await insert('msg', 'd', 10, clock.now());
    await deliver();
    clock.advance(20 * DAY); // the message is 20 days old: inside MSGX_PROC_RETENTION_DAYS and the window
    const r = await sweepDeliveredEvents(pg.db, { now: clock.now(), retentionDays: 30, chunk: 50 });
    expect(await present([...ids.open!, ...ids.bulk3!])).toEqual([]);
    expect(r.deleted).toBe(31);
    expect(await present([...ids.dead!, ...ids.after])).toEqual([...ids.dead!, ...ids.after]);
    const t = await trace(msgId);
    expect(t.events.map((e) => e.eventId)).toEqual(traceBefore);
    expect(t.events.every((e) => e.status === 'SENT')).toBe(true);
    // Inside the window the trace still says where each event went.
    expect(t.events.every((e) => e.deliveries.length > 0 && e.sentAt !== null)).toBe(true);
    // The cursors still read: states derive, a new event is delivered.
    const states = await pg.db.query<{ s: string }>(
      `SELECT msgx_event_state(status, target, event_id, writer_xid, $2) AS s FROM msg_event WHERE event_id = ANY($1::bigint[])`,
      [ids.after, clock.now()],
    );
    expect(states.rows.map((x) => x.s)).toEqual(ids.after.map(() => 'SENT'));
    const before = sink.keys.filter((k) => k === 'e').length;
    await insert('msg', 'e', 1, clock.now());
    await deliver();
    expect(sink.keys.filter((k) => k === 'e').length).toBe(before + 1);
    // Nothing left to remove: one query, no delete.
    const db = counting(pg.db);
    expect((await sweepDeliveredEvents(db, { now: clock.now(), retentionDays: 30 })).deleted).toBe(0);
    expect(db.statements).toHaveLength(1);
  });

  it('a delivery a transactional message still waits for keeps itself and what follows', async () => {
    const batch = await insert('msg', 'f', 20, new Date(clock.now().getTime() - 40 * DAY));
    await deliver();
    // Everything outside the window now: only keepFrom holds the cut.
    await pg.db.query(`UPDATE msg_event SET created_at = $1`, [new Date(clock.now().getTime() - 40 * DAY)]);
    const r = await sweepDeliveredEvents(pg.db, { now: clock.now(), retentionDays: 30, keepFrom: batch[9] });
    expect(r.cut).toBe(batch[9]);
    expect(await present(batch)).toEqual(batch.slice(9));
  });
});
