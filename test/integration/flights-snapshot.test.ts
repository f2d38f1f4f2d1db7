import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { decode } from '../../lib/codec/decode.ts';
import type { Queryable } from '../../lib/db/db.ts';
import { flightJson } from '../../lib/flights/json.ts';
import { scheduleProcessor } from '../../lib/flights/schedule.ts';
import { readFlight } from '../../lib/flights/store.ts';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { flightPipeline } from '../fixtures/messages/pump.ts';
import { runDirect, testConfig } from '../fixtures/messages/run.ts';
import { backfillSweep } from '../../lib/pipeline/backfill.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

let pg: TestPg;
beforeAll(async () => (pg = await freshPg()));
afterAll(async () => pg?.drop());
beforeEach(async () => {
  await pg.db.query(
    `TRUNCATE flight_schd, flight_rout, flight_csfl, flight_gate, flight_stnd, flight_belt, flight_chkc, flight_brdg,
              flight_lnge, flight_dlay, msg_event, schd_snap_log, proc_state, req_track CASCADE`,
  );
});

const now = new Date('2026-11-29T01:00:00Z');
let seq = 100;
const plan = (flids: string[], o: { dttm?: string; opdy?: string; cnt?: number; extra?: Record<string, string> } = {}) =>
  schd('DNLD', {
    seqn: seq++,
    dttm: o.dttm ?? '20261129080000',
    opdy: o.opdy ?? '20261129',
    cnt: o.cnt,
    flights: flids.map((id) => flight({ FLID: id, OPDY: o.opdy ?? '20261129', FLNO: `0${id}`, STAT: 'SCH', ...o.extra })),
  });

const versions = async () =>
  (await pg.db.query<{ flid: string; state_version: number }>(`SELECT flid, state_version FROM flight_schd ORDER BY flid`)).rows;
const eventCount = async () => Number((await pg.db.query<{ n: string }>(`SELECT count(*) AS n FROM msg_event`)).rows[0]!.n);

describe('SCHD DNLD', () => {
  it('creates flights at version 1 with one msg event and one schd upsert each, and logs the snapshot', async () => {
    const r = await runDirect(pg.db, plan(['1001', '1002']), { now });
    expect(r).toMatchObject({ status: 'SUCCEEDED', note: 'created=2 updated=0 unchanged=0 stale=0' });
    expect(await versions()).toEqual([
      { flid: '1001', state_version: 1 },
      { flid: '1002', state_version: 1 },
    ]);
    const ev = await pg.db.query<{ target: string; event_type: string; partition_key: string; source_kind: string; source_id: string }>(
      `SELECT target, event_type, partition_key, source_kind, source_id FROM msg_event ORDER BY event_id`,
    );
    expect(ev.rows.map((e) => `${e.target}:${e.event_type}:${e.partition_key}`)).toEqual([
      'msg:FLIGHT_CREATED:1001',
      'schd:UPSERT:1001',
      'msg:FLIGHT_CREATED:1002',
      'schd:UPSERT:1002',
    ]);
    expect(ev.rows.every((e) => e.source_kind === 'proc' && e.source_id === String(r.msgId))).toBe(true);
    const log = await pg.db.query(`SELECT styp, scope, declared, flights, created, updated, unchanged, stale FROM schd_snap_log`);
    expect(log.rows).toEqual([
      { styp: 'DNLD', scope: '20261129', declared: 2, flights: 2, created: 2, updated: 0, unchanged: 0, stale: 0 },
    ]);
  });

  it('never deletes flights the plan does not mention', async () => {
    await runDirect(pg.db, plan(['1001', '1002']), { now });
    await runDirect(pg.db, plan(['1002'], { dttm: '20261129090000' }), { now });
    expect((await versions()).map((v) => v.flid)).toEqual(['1001', '1002']);
    expect((await readFlight(pg.db, '1001'))!.status).toBe('ACTIVE');
  });

  it('a replayed snapshot (same identity) changes nothing and bumps no version', async () => {
    const text = plan(['1001']);
    await runDirect(pg.db, text, { now });
    await runDirect(pg.db, flop('ETOT', { seqn: seq++, dttm: '20261129081000' }, flight({ FLID: '1001', ETOT: '20261129101000' })), {
      now,
    });
    const before = await eventCount();
    const r = await runDirect(pg.db, text, { now });
    expect(r.status).toBe('SKIPPED');
    expect(r.note).toMatch(/^duplicate-of:/);
    expect(await versions()).toEqual([{ flid: '1001', state_version: 2 }]);
    expect(await eventCount()).toBe(before);
    expect((await readFlight(pg.db, '1001'))!.scalars.ETOT).toBe('20261129101000');
  });

  it('an identical snapshot under a new identity changes nothing and emits nothing', async () => {
    await runDirect(pg.db, plan(['1001', '1002']), { now });
    const before = await eventCount();
    const r = await runDirect(pg.db, plan(['1001', '1002'], { dttm: '20261129090000' }), { now });
    expect(r).toMatchObject({ status: 'SUCCEEDED', note: 'no change: unchanged=2 stale=0' });
    expect(await versions()).toEqual([
      { flid: '1001', state_version: 1 },
      { flid: '1002', state_version: 1 },
    ]);
    expect(await eventCount()).toBe(before);
  });

  it('a late snapshot (older DTTM than the flight state) does not roll it back', async () => {
    await runDirect(pg.db, plan(['1001'], { dttm: '20261129080000' }), { now });
    await runDirect(pg.db, flop('STAT', { seqn: seq++, dttm: '20261129083000' }, flight({ FLID: '1001', STAT: 'BOR' })), { now });
    const r = await runDirect(pg.db, plan(['1001', '1003'], { dttm: '20261129075900' }), { now });
    expect(r).toMatchObject({ status: 'SUCCEEDED', note: 'created=1 updated=0 unchanged=0 stale=1' });
    const f = (await readFlight(pg.db, '1001'))!;
    expect(f.scalars.STAT).toBe('BOR');
    expect(f.stateVersion).toBe(2);
    expect((await readFlight(pg.db, '1003'))!.stateVersion).toBe(1);
  });

  it('a transaction that fails after writing leaves nothing; the retry applies it once at version 1', async () => {
    const config = testConfig();
    const message = decode(plan(['1001', '1002']), { timezone: config.timezone });
    // Fail the statement after the flight write (the event insert): everything before must roll back.
    await expect(
      pg.db.tx(async (tx) => {
        let n = 0;
        const failing: Queryable = {
          query: (sql, params) => {
            if (/INSERT INTO msg_event/.test(sql) && n++ === 0) throw new Error('connection reset');
            return tx.query(sql, params);
          },
        };
        return scheduleProcessor({ tx: failing, msgId: 9001, message, now, config });
      }),
    ).rejects.toThrow('connection reset');
    expect(await versions()).toEqual([]);
    expect(await eventCount()).toBe(0);
    const out = await pg.db.tx((tx) => scheduleProcessor({ tx, msgId: 9001, message, now, config }));
    expect(out.status).toBe('SUCCEEDED');
    expect(await versions()).toEqual([
      { flid: '1001', state_version: 1 },
      { flid: '1002', state_version: 1 },
    ]);
    expect(await eventCount()).toBe(4);
  });
});

describe('SCHD through the pump and the mailbox', () => {
  it('the same content again under a new SEQN ends SUCCEEDED "no change" in the mailbox, not SKIPPED', async () => {
    const p = await flightPipeline(pg);
    const content = (seqn: number) =>
      schd('DNLD', {
        seqn,
        dttm: '20261129080000',
        opdy: '20261129',
        flights: [
          flight({ FLID: '5001', OPDY: '20261129', FLNO: '0501', STAT: 'SCH' }),
          flight({ FLID: '5002', OPDY: '20261129', FLNO: '0502' }),
        ],
      });
    const [first, again] = await p.post(content(seq++), content(seq++));
    await p.drain();
    await backfillSweep(p.ctx);
    const box = await pg.db.query<{ ID: number; PROC_STATUS: string; PROC_NOTE: string | null }>(
      `SELECT "ID", "PROC_STATUS", "PROC_NOTE" FROM "CMINMSGS" WHERE "ID" = ANY($1::bigint[]) ORDER BY "ID"`,
      [[first, again]],
    );
    expect(box.rows).toEqual([
      { ID: first, PROC_STATUS: 'SUCCEEDED', PROC_NOTE: 'created=2 updated=0 unchanged=0 stale=0' },
      { ID: again, PROC_STATUS: 'SUCCEEDED', PROC_NOTE: 'no change: unchanged=2 stale=0' },
    ]);
    // Nothing was written for the repeat: one version, one event pair per flight.
    expect((await readFlight(pg.db, '5001'))!.stateVersion).toBe(1);
    expect(await eventCount()).toBe(4);
  });
});

describe('SCHD whole-package protocol rejection: DEAD(PROTOCOL), state and versions unchanged', () => {
  const cases: [string, () => string, RegExp][] = [
    ['declared count differs', () => plan(['1001', '1002'], { cnt: 3, extra: { STAT: 'DEP' } }), /CNT declares 3 flights, 2 present/],
    [
      'a flight of another operation day',
      () =>
        schd('DNLD', {
          seqn: seq++,
          dttm: '20261129090000',
          opdy: '20261129',
          flights: [flight({ FLID: '1001', OPDY: '20261129', STAT: 'DEP' }), flight({ FLID: '1009', OPDY: '20261130' })],
        }),
      /operation day 20261130, the package of 20261129/,
    ],
    [
      'an FLID already bound to another day',
      () => plan(['1001', '1002', '1003'], { opdy: '20261130', dttm: '20261129090000' }),
      /FLID 1001 is bound to operation day 20261129, not 20261130/,
    ],
    ['no CNT', () => plan(['1001'], { cnt: undefined }).replace(/<CNT>\d+<\/CNT>/, ''), /has no CNT/],
    ['an FLID twice', () => plan(['1001', '1001']), /appears twice/],
  ];
  it.each(cases)('%s', async (_, text, reason) => {
    await runDirect(pg.db, plan(['1001', '1002']), { now });
    const before = { versions: await versions(), events: await eventCount(), f: flightJson((await readFlight(pg.db, '1001'))!) };
    const r = await runDirect(pg.db, text(), { now });
    expect(r).toMatchObject({ status: 'DEAD', errorClass: 'PROTOCOL' });
    expect(r.detail).toMatch(reason);
    expect(await versions()).toEqual(before.versions);
    expect(await eventCount()).toBe(before.events);
    expect(flightJson((await readFlight(pg.db, '1001'))!)).toEqual(before.f);
    expect((await pg.db.query(`SELECT count(*)::int AS n FROM schd_snap_log`)).rows[0]).toEqual({ n: 1 });
  });
});

describe('SCHD ADFT', () => {
  it('adds one flight; a second flight in the package is a protocol error', async () => {
    const one = schd('ADFT', {
      seqn: seq++,
      dttm: '20261129080000',
      cnt: null,
      flights: [flight({ FLID: '2001', OPDY: '20261129', FLNO: '9' })],
    });
    expect(await runDirect(pg.db, one, { now })).toMatchObject({ status: 'SUCCEEDED' });
    expect((await readFlight(pg.db, '2001'))!.stateVersion).toBe(1);
    const two = schd('ADFT', { seqn: seq++, opdy: '20261129', flights: [flight({ FLID: '2002' }), flight({ FLID: '2003' })] });
    expect(await runDirect(pg.db, two, { now })).toMatchObject({ status: 'DEAD', errorClass: 'PROTOCOL' });
    expect(await readFlight(pg.db, '2002')).toBeUndefined();
  });
});
