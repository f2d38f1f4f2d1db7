import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Queryable } from '../../lib/db/db.ts';
import { historySweep } from '../../lib/flights/history.ts';
import { flightRoutes } from '../../lib/flights/routes.ts';
import { archiveProcState } from '../../lib/pipeline/procArchive.ts';
import { Router } from '../../lib/http/router.ts';
import type { HttpRequest } from '../../lib/http/types.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { fdel, flight, schd } from '../fixtures/messages/build.ts';
import { runDirect, testConfig } from '../fixtures/messages/run.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';
import { makeContext } from '../helpers/pipeline.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';

let pg: TestPg;
beforeAll(async () => (pg = await freshPg()));
afterAll(async () => pg?.drop());
beforeEach(async () => {
  await pg.db.query(
    `TRUNCATE flight_schd, flight_rout, flight_csfl, flight_gate, flight_stnd, flight_belt, flight_chkc, flight_brdg,
              flight_lnge, flight_dlay, flight_hst, msg_event, schd_snap_log, proc_state, proc_state_hst CASCADE`,
  );
});

let seq = 1;
const t0 = new Date('2026-11-20T01:00:00Z');
const plan = (flids: string[], day = '20261120') =>
  schd('DNLD', {
    seqn: seq++,
    dttm: `${day}080000`,
    opdy: day,
    flights: flids.map((id) => flight({ FLID: id, OPDY: day, FLNO: '0001', GATE: [{ CODE: 'G1', BEG: '', END: '' }] })),
  });
const count = async (table: string) => (await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;

describe('history sweep', () => {
  it('moves flights silent past retention (DELETED included) to flight_hst; a tombstone first for those never deleted', async () => {
    await runDirect(pg.db, plan(['1', '2', '3']), { now: t0 });
    await runDirect(pg.db, fdel({ seqn: seq++ }, '2'), { now: t0 });
    await runDirect(pg.db, plan(['4'], '20261128'), { now: new Date('2026-11-28T01:00:00Z') });
    const eventsBefore = await count('msg_event');
    const clock = new FakeClock('2026-11-29T19:30:00Z'); // 03:30 airport time on the 30th
    const config = testConfig(); // retention 7 days
    const r = await historySweep({ db: pg.db, config, clock });
    expect(r).toMatchObject({ flights: 3, tombstones: 2 });
    expect((await pg.db.query(`SELECT flid FROM flight_schd ORDER BY flid`)).rows).toEqual([{ flid: '4' }]);
    expect(await count('flight_gate')).toBe(1);
    const hst = await pg.db.query<{ flid: string; status: string; state_version: number; state: { GATE: unknown[] } }>(
      `SELECT flid, status, state_version, state FROM flight_hst ORDER BY flid`,
    );
    expect(hst.rows.map((h) => `${h.flid}:${h.status}:v${h.state_version}`)).toEqual(['1:ACTIVE:v1', '2:DELETED:v2', '3:ACTIVE:v1']);
    expect(hst.rows[0]!.state.GATE).toEqual([{ CODE: 'G1', BEG: '', END: '' }]);
    const ev = await pg.db.query<{
      target: string;
      event_type: string;
      partition_key: string;
      state_version: number;
      value: string | null;
    }>(`SELECT target, event_type, partition_key, state_version, value FROM msg_event ORDER BY event_id OFFSET $1`, [eventsBefore]);
    expect(ev.rows.map((e) => `${e.target}:${e.event_type}:${e.partition_key}:v${e.state_version}`)).toEqual([
      'msg:FLIGHT_PURGED:1:v2',
      'schd:TOMBSTONE:1:v2',
      'msg:FLIGHT_PURGED:3:v2',
      'schd:TOMBSTONE:3:v2',
    ]);
    // Running again finds nothing more to do.
    expect(await historySweep({ db: pg.db, config, clock })).toMatchObject({ flights: 0, tombstones: 0 });
  });

  it('a flight sent again after the sweep continues its version: a consumer never sees it go backwards', async () => {
    await runDirect(pg.db, plan(['1', '2', '3']), { now: t0 });
    await runDirect(pg.db, fdel({ seqn: seq++ }, '2'), { now: t0 });
    await historySweep({ db: pg.db, config: testConfig(), clock: new FakeClock('2026-11-29T19:30:00Z') });
    expect(await count('flight_schd')).toBe(0);
    // Later the same flights come again (a late plan), then a change to one of them.
    const later = new Date('2026-11-29T20:00:00Z');
    await runDirect(pg.db, plan(['1', '2']), { now: later });
    await runDirect(pg.db, fdel({ seqn: seq++ }, '1'), { now: later });

    // The consumer's view: every schd record of a flight, in order, must carry a higher version.
    const ev = await pg.db.query<{ flid: string; event_type: string; state_version: number }>(
      `SELECT partition_key AS flid, event_type, state_version FROM msg_event WHERE target = 'schd' ORDER BY event_id`,
    );
    const seen = new Map<string, number[]>();
    for (const e of ev.rows) seen.set(e.flid, [...(seen.get(e.flid) ?? []), e.state_version]);
    // 1: created v1, purged v2, back v3, deleted v4; 2: created v1, deleted v2, back v3; 3: created v1, purged v2.
    expect(Object.fromEntries(seen)).toEqual({ '1': [1, 2, 3, 4], '2': [1, 2, 3], '3': [1, 2] });
    const router = new Router(flightRoutes);
    const ctx = makeContext({ db: pg.db, mailbox: new PgMailbox(pg.db), env: { MSGX_LOG_LEVEL: 'SILENT' } });
    const get = (flid: string): HttpRequest => ({
      method: 'GET',
      path: `/v1/flights/${flid}`,
      headers: {},
      query: {},
      body: '',
      params: {},
      isAdmin: false,
    });
    expect((await router.handle(get('2'), ctx)).body).toMatchObject({ FLID: '2', status: 'ACTIVE', stateVersion: 3 });
  });

  it('is restartable: a crash between copy and delete loses and duplicates nothing', async () => {
    await runDirect(pg.db, plan(['1', '2']), { now: t0 });
    const config = testConfig();
    const clock = new FakeClock('2026-11-29T19:30:00Z');
    // Crash right after the copy: the delete never runs.
    const crashing = {
      ...pg.db,
      query: pg.db.query.bind(pg.db),
      tx: <T>(fn: (tx: Queryable) => Promise<T>) =>
        pg.db.tx((tx) =>
          fn({
            query: async (sql, params) => {
              if (/^WITH d0 AS \(DELETE/.test(sql)) throw new Error('killed');
              return tx.query(sql, params);
            },
          }),
        ),
    };
    await expect(historySweep({ db: crashing, config, clock })).rejects.toThrow('killed');
    expect(await count('flight_schd')).toBe(2);
    expect(await count('flight_hst')).toBe(0);
    await historySweep({ db: pg.db, config, clock });
    expect(await count('flight_schd')).toBe(0);
    expect(await count('flight_hst')).toBe(2);
  });

  // By (scope end, receipt). Seen red with the purge by received_at alone: the plans received in
  // August for a day in November and for the 1st of September were dropped too.
  it('drops snapshot log rows whose day and receipt are both older than 90 days', async () => {
    await runDirect(pg.db, plan(['1'], '20260801'), { now: new Date('2026-08-01T00:00:00Z') });
    await runDirect(pg.db, plan(['3'], '20261120'), { now: new Date('2026-08-01T00:00:00Z') });
    await runDirect(pg.db, plan(['2'], '20261129'), { now: new Date('2026-11-29T00:00:00Z') });
    // The cutoff is 90 days back: 2026-08-31T19:30Z, the 1st of September in airport time.
    await runDirect(pg.db, plan(['4'], '20260830'), { now: new Date('2026-11-29T00:00:00Z') });
    await runDirect(pg.db, plan(['5'], '20260831'), { now: new Date('2026-08-02T00:00:00Z') });
    await runDirect(pg.db, plan(['6'], '20260901'), { now: new Date('2026-08-02T00:00:00Z') });
    const r = await historySweep({ db: pg.db, config: testConfig(), clock: new FakeClock('2026-11-29T19:30:00Z') });
    const left = await pg.db.query<{ scope: string }>(`SELECT scope FROM schd_snap_log ORDER BY scope`);
    expect(left.rows.map((x) => x.scope)).toEqual(['20260830', '20260901', '20261120', '20261129']);
    expect(r.snapLog).toBe(2);
  });
});

describe('proc_state archive', () => {
  it('moves terminal rows past retention; PENDING and FAILED stay; identities stay unique across both', async () => {
    const old = new Date('2026-10-01T00:00:00Z');
    await pg.db.query(
      `INSERT INTO proc_state (msg_id, status, identity_key, next_attempt_at, enqueued_at, updated_at, finished_at) VALUES
        (1, 'SUCCEEDED', 'A|FLOP|ETOT|1', $1, $1, $1, $1), (2, 'SKIPPED', null, $1, $1, $1, $1),
        (3, 'DEAD', null, $1, $1, $1, $1), (4, 'PENDING', null, $1, $1, $1, null),
        (5, 'FAILED', 'A|FLOP|ETOT|5', $1, $1, $1, null), (6, 'SUCCEEDED', 'A|FLOP|ETOT|6', $1, $1, $1, $2)`,
      [old, new Date('2026-11-28T00:00:00Z')],
    );
    const n = await archiveProcState(pg.db, { now: new Date('2026-11-29T00:00:00Z'), retentionDays: 30 });
    expect(n).toBe(3);
    expect((await pg.db.query(`SELECT msg_id FROM proc_state ORDER BY msg_id`)).rows).toEqual([
      { msg_id: 4 },
      { msg_id: 5 },
      { msg_id: 6 },
    ]);
    expect((await pg.db.query(`SELECT msg_id, identity_key FROM proc_state_hst ORDER BY msg_id`)).rows).toEqual([
      { msg_id: 1, identity_key: 'A|FLOP|ETOT|1' },
      { msg_id: 2, identity_key: null },
      { msg_id: 3, identity_key: null },
    ]);
    // A replayed snapshot whose first copy was archived is still recognised.
    await pg.db.query(`UPDATE proc_state_hst SET identity_key = 'FIMS|SCHD|DNLD|777' WHERE msg_id = 1`);
    const r = await runDirect(pg.db, schd('DNLD', { seqn: 777, opdy: '20261129', flights: [flight({ FLID: '9' })] }), { now: new Date() });
    expect(r).toMatchObject({ status: 'SKIPPED', note: 'duplicate-of:1' });
  });
});

describe('read API', () => {
  const get = (path: string, query: Record<string, string> = {}): HttpRequest => ({
    method: 'GET',
    path,
    headers: {},
    query,
    body: '',
    params: {},
    isAdmin: false,
  });

  it('GET /v1/flights?day and /v1/flights/{flid}: wire names, text as received, version, status; DELETED 200; unknown 404', async () => {
    await runDirect(
      pg.db,
      schd('DNLD', {
        seqn: seq++,
        dttm: '20261129080000',
        opdy: '20261129',
        flights: [
          flight({ FLID: '1001', OPDY: '20261129', FLNO: '0310', XTRA: '007', ROUT: [{ SEQ: '1', APCD: 'CAN' }] }),
          flight({ FLID: '1002', OPDY: '20261129' }),
        ],
      }),
      { now: t0 },
    );
    await runDirect(pg.db, fdel({ seqn: seq++ }, '1002'), { now: t0 });
    const ctx = makeContext({ db: pg.db, mailbox: new PgMailbox(pg.db) });
    const router = new Router(flightRoutes);
    const one = await router.handle(get('/v1/flights/1001'), ctx);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({
      FLID: '1001',
      OPDY: '20261129',
      FLNO: '0310',
      XTRA: '007',
      ROUT: [{ SEQ: '1', APCD: 'CAN' }],
      GATE: [],
      stateVersion: 1,
      status: 'ACTIVE',
      updatedAt: t0.toISOString(),
    });
    expect((await router.handle(get('/v1/flights/1002'), ctx)).body).toMatchObject({ status: 'DELETED', stateVersion: 2 });
    const missing = await router.handle(get('/v1/flights/nope'), ctx);
    expect(missing).toMatchObject({ status: 404, body: { error: 'not_found' } });
    const day = await router.handle(get('/v1/flights', { day: '20261129' }), ctx);
    expect(day.status).toBe(200);
    expect((day.body as { flights: { FLID: string }[] }).flights.map((f) => f.FLID)).toEqual(['1001', '1002']);
    expect((await router.handle(get('/v1/flights', {}), ctx)).status).toBe(400);
  });
});
