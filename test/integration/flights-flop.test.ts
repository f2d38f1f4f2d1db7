import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode } from '../../lib/codec/decode.ts';
import type { Queryable } from '../../lib/db/db.ts';
import { flopProcessor } from '../../lib/flights/flop.ts';
import { FLOP_SUBTYPES } from '../../lib/flights/flopRules.ts';
import { readFlight } from '../../lib/flights/store.ts';
import { fdel, flight, flop, schd } from '../fixtures/messages/build.ts';
import { flightPipeline } from '../fixtures/messages/pump.ts';
import { testConfig } from '../fixtures/messages/run.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

let pg: TestPg;
let p: Awaited<ReturnType<typeof flightPipeline>>;
let seq = 1;
beforeAll(async () => {
  pg = await freshPg();
  p = await flightPipeline(pg);
  const flids = Array.from({ length: 40 }, (_, i) => String(3000 + i));
  await p.post(
    schd('DNLD', {
      seqn: seq++,
      dttm: '20261129060000',
      opdy: '20261129',
      flights: flids.map((id) =>
        flight({
          FLID: id,
          OPDY: '20261129',
          AWCD: 'CZ',
          FLNO: '0310',
          STAT: 'SCH',
          GATE: [{ CODE: 'B1', BEG: '20261129090000', END: '20261129093000' }],
        }),
      ),
    }),
  );
  await p.drain();
});
afterAll(async () => pg?.drop());

const schdEvents = async (flid: string) =>
  (
    await pg.db.query<{ event_type: string; state_version: number; value: string | null }>(
      `SELECT event_type, state_version, value FROM msg_event WHERE target = 'schd' AND partition_key = $1 ORDER BY event_id`,
      [flid],
    )
  ).rows;

type Case = [styp: string, fields: Record<string, string | Record<string, string>[]>, expectJson: Record<string, unknown>];
const items = (code: string) => [{ CODE: code, BEG: '20261129100000', END: '20261129103000' }];
const cases: Case[] = [
  ['ETOT', { ETOT: '20261129101500' }, { ETOT: '20261129101500' }],
  ['ATOT', { ATOT: '20261129102000' }, { ATOT: '20261129102000' }],
  ['ELDT', { ELDT: '20261129120000' }, { ELDT: '20261129120000' }],
  ['ALDT', { ALDT: '20261129120500' }, { ALDT: '20261129120500' }],
  ['AIBT', { AIBT: '20261129121000' }, { AIBT: '20261129121000' }],
  ['AOBT', { AOBT: '20261129100500' }, { AOBT: '20261129100500' }],
  ['GATE', { GATE: items('B12') }, { GATE: items('B12') }],
  ['STND', { STND: items('201') }, { STND: items('201') }],
  ['BELT', { BELT: items('07') }, { BELT: items('07') }],
  ['CHKC', { CHKC: [...items('A01'), ...items('A02')] }, { CHKC: [...items('A01'), ...items('A02')] }],
  ['BRDG', { BRDG: items('R3') }, { BRDG: items('R3') }],
  ['LNGE', { LNGE: items('L1') }, { LNGE: items('L1') }],
  ['DLAY', { DLAY: [{ CODE: '93', MIN: '015' }] }, { DLAY: [{ CODE: '93', MIN: '015' }] }],
  ['CANX', { CANX: 'Y', STAT: 'CNL' }, { CANX: 'Y', STAT: 'CNL' }],
  ['DIVT', { DIVT: 'SZX' }, { DIVT: 'SZX' }],
  ['RETN', { RETN: 'Y' }, { RETN: 'Y' }],
  ['BORD', { BORD: '20261129093000' }, { BORD: '20261129093000' }],
  ['GTCL', { GTCL: '20261129100000' }, { GTCL: '20261129100000' }],
  ['STAT', { STAT: 'DEP' }, { STAT: 'DEP' }],
  ['EOBT', { EOBT: '20261129100000' }, { EOBT: '20261129100000' }],
  [
    'ROUT',
    {
      ROUT: [
        { SEQ: '1', APCD: 'CAN' },
        { SEQ: '2', APCD: 'PEK' },
      ],
    },
    {
      ROUT: [
        { SEQ: '1', APCD: 'CAN' },
        { SEQ: '2', APCD: 'PEK' },
      ],
    },
  ],
  ['CSFL', { CSFL: [{ AWCD: 'MU', FLNO: '0001' }] }, { CSFL: [{ AWCD: 'MU', FLNO: '0001' }] }],
  ['EIBT', { EIBT: '20261129121500' }, { EIBT: '20261129121500' }],
  ['SOBT', { SOBT: '20261129095500' }, { SOBT: '20261129095500' }],
  ['SIBT', { SIBT: '20261129120000' }, { SIBT: '20261129120000' }],
  ['ACTP', { ACTP: 'A321' }, { ACTP: 'A321' }],
  ['ACNO', { ACNO: 'B1234' }, { ACNO: 'B1234' }],
  ['TERM', { TERM: 'T2' }, { TERM: 'T2' }],
  ['UPDT', { ETOT: '20261129101000', STND: items('105') }, { ETOT: '20261129101000', STND: items('105') }],
];
// Written out independently of lib/flights/flopRules.ts: the 29 subtypes of the upstream protocol.
const ALL_SUBTYPES = [
  'ETOT',
  'ATOT',
  'ELDT',
  'ALDT',
  'AIBT',
  'AOBT',
  'EOBT',
  'EIBT',
  'SOBT',
  'SIBT',
  'GATE',
  'STND',
  'BELT',
  'CHKC',
  'BRDG',
  'LNGE',
  'DLAY',
  'ROUT',
  'CSFL',
  'CANX',
  'DIVT',
  'RETN',
  'BORD',
  'GTCL',
  'STAT',
  'ACTP',
  'ACNO',
  'TERM',
  'UPDT',
];

describe('FLOP through the pump: every supported STYP', () => {
  it.each(cases.map((c, i) => [...c, String(3000 + i)] as const))('%s', async (styp, fields, expected, flid) => {
    const [id] = await p.post(flop(styp, { seqn: seq++, dttm: '20261129070000' }, flight({ FLID: flid, ...fields })));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SUCCEEDED', error_class: null });
    const f = (await readFlight(pg.db, flid))!;
    expect(f.stateVersion).toBe(2);
    const last = (await schdEvents(flid)).at(-1)!;
    expect(last).toMatchObject({ event_type: 'UPSERT', state_version: 2 });
    expect(JSON.parse(last.value!)).toMatchObject({
      v: 1,
      FLID: flid,
      AWCD: 'CZ',
      FLNO: '0310',
      stateVersion: 2,
      status: 'ACTIVE',
      ...expected,
    });
  });
});

describe('FLOP: the body must carry what its STYP names', () => {
  it('every one of the 29 subtypes has a case above, and msgx applies exactly those', () => {
    expect(new Set(cases.map((c) => c[0]))).toEqual(new Set(ALL_SUBTYPES));
    expect(ALL_SUBTYPES).toHaveLength(29);
    expect(new Set(FLOP_SUBTYPES)).toEqual(new Set(ALL_SUBTYPES));
  });

  // A body with some other field only: STYP=GATE without GATE, STYP=STAT without STAT, UPDT with nothing.
  const wrongBody = (styp: string): Record<string, string> =>
    styp === 'UPDT' ? {} : styp === 'STAT' ? { ETOT: '20261129111111' } : { STAT: 'XXX' };
  it.each(ALL_SUBTYPES)('STYP=%s without its field is DEAD(PROTOCOL) and changes nothing', async (styp) => {
    const flid = '3036';
    const before = (await readFlight(pg.db, flid))!;
    const events = (await schdEvents(flid)).length;
    const [id] = await p.post(flop(styp, { seqn: seq++ }, flight({ FLID: flid, ...wrongBody(styp) })));
    await p.drain();
    const st = await p.status(id!);
    expect(st).toMatchObject({ status: 'DEAD', error_class: 'PROTOCOL' });
    expect(st!.error_detail).toContain(`FLOP/${styp}`);
    expect(await readFlight(pg.db, flid)).toEqual(before);
    expect((await schdEvents(flid)).length).toBe(events);
  });

  it('an empty element still carries the field: STYP=GATE with <GATE/> clears the gates', async () => {
    const [id] = await p.post(flop('GATE', { seqn: seq++ }, flight({ FLID: '3037', GATE: [] })));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SUCCEEDED' });
    expect((await readFlight(pg.db, '3037'))!.resources.GATE).toEqual([]);
  });
});

describe('ROUT and ERUT: two collections, legs keyed jointly by (kind, SEQ)', () => {
  const legs = (...apcds: string[]) => apcds.map((APCD, i) => ({ SEQ: String(i + 1), APCD }));
  it('a plan carries both with the same leg numbers; a ROUT FLOP with only ERUT changes ERUT alone', async () => {
    const flid = 'R3801';
    const [plan] = await p.post(
      schd('ADFT', {
        seqn: seq++,
        dttm: '20261129061000',
        cnt: null,
        flights: [flight({ FLID: flid, OPDY: '20261129', FLNO: '0338', ROUT: legs('CAN', 'PEK'), ERUT: legs('CAN', 'WUH', 'PEK') })],
      }),
    );
    await p.drain();
    expect(await p.status(plan!)).toMatchObject({ status: 'SUCCEEDED' });
    const [change] = await p.post(flop('ROUT', { seqn: seq++, dttm: '20261129070000' }, flight({ FLID: flid, ERUT: legs('CAN', 'SHA') })));
    await p.drain();
    expect(await p.status(change!)).toMatchObject({ status: 'SUCCEEDED' });

    const last = JSON.parse((await schdEvents(flid)).at(-1)!.value!);
    expect(last).toMatchObject({ FLID: flid, stateVersion: 2, ROUT: legs('CAN', 'PEK'), ERUT: legs('CAN', 'SHA') });
    // The detail table holds each leg once per collection under the joint key.
    const rows = await pg.db.query(`SELECT kind, seq, apcd FROM flight_rout WHERE flid = $1 ORDER BY kind DESC, seq`, [flid]);
    expect(rows.rows).toEqual([
      { kind: 'ROUT', seq: '1', apcd: 'CAN' },
      { kind: 'ROUT', seq: '2', apcd: 'PEK' },
      { kind: 'ERUT', seq: '1', apcd: 'CAN' },
      { kind: 'ERUT', seq: '2', apcd: 'SHA' },
    ]);

    // An empty ERUT clears the altered route and leaves the planned one.
    const [clear] = await p.post(flop('ROUT', { seqn: seq++, dttm: '20261129071000' }, flight({ FLID: flid, ERUT: [] })));
    await p.drain();
    expect(await p.status(clear!)).toMatchObject({ status: 'SUCCEEDED' });
    expect(JSON.parse((await schdEvents(flid)).at(-1)!.value!)).toMatchObject({ stateVersion: 3, ROUT: legs('CAN', 'PEK'), ERUT: [] });
  });

  it('the same leg twice within ERUT is a protocol error', async () => {
    const [id] = await p.post(
      flop(
        'ROUT',
        { seqn: seq++ },
        flight({
          FLID: 'R3802',
          ERUT: [
            { SEQ: '1', APCD: 'CAN' },
            { SEQ: '1', APCD: 'PEK' },
          ],
        }),
      ),
    );
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'DEAD', error_class: 'PROTOCOL' });
  });
});

describe('FLOP semantics', () => {
  it('an empty element clears; unknown elements are kept verbatim and round-trip into events', async () => {
    const [a, b] = await p.post(
      flop(
        'UPDT',
        { seqn: seq++ },
        flight({ FLID: '3030', ETOT: '20261129101500', XREM: ' free text 007 ', GATE: [{ CODE: 'B9', BEG: '', END: '', XNOTE: 'n' }] }),
      ),
      flop('GATE', { seqn: seq++ }, flight({ FLID: '3030', ETOT: '', GATE: [] })),
    );
    await p.drain();
    expect((await p.status(a!))?.status).toBe('SUCCEEDED');
    expect((await p.status(b!))?.status).toBe('SUCCEEDED');
    const ev = await schdEvents('3030');
    const mid = JSON.parse(ev.at(-2)!.value!);
    expect(mid).toMatchObject({ ETOT: '20261129101500', XREM: 'free text 007', GATE: [{ CODE: 'B9', BEG: '', END: '', XNOTE: 'n' }] });
    const last = JSON.parse(ev.at(-1)!.value!);
    expect(last).toMatchObject({ ETOT: '', GATE: [], XREM: 'free text 007', stateVersion: 3 });
  });

  it('a FLOP that changes nothing bumps nothing and emits nothing', async () => {
    const before = (await schdEvents('3031')).length;
    const [id] = await p.post(flop('STAT', { seqn: seq++ }, flight({ FLID: '3031', STAT: 'SCH' })));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SUCCEEDED', note: 'unchanged' });
    expect((await readFlight(pg.db, '3031'))!.stateVersion).toBe(1);
    expect((await schdEvents('3031')).length).toBe(before);
  });

  it('FLOP and FDEL for an unknown flight are SKIPPED no-such-flight', async () => {
    const [a, b] = await p.post(
      flop('ETOT', { seqn: seq++ }, flight({ FLID: 'nope', ETOT: '20261129101500' })),
      fdel({ seqn: seq++ }, 'nope'),
    );
    await p.drain();
    expect(await p.status(a!)).toMatchObject({ status: 'SKIPPED', note: 'no-such-flight' });
    expect(await p.status(b!)).toMatchObject({ status: 'SKIPPED', note: 'no-such-flight' });
  });

  it('FDEL marks DELETED, bumps the version and emits a tombstone; a FLOP after it is skipped', async () => {
    const [a, b] = await p.post(
      fdel({ seqn: seq++ }, '3032'),
      flop('ETOT', { seqn: seq++ }, flight({ FLID: '3032', ETOT: '20261129101500' })),
    );
    await p.drain();
    expect(await p.status(a!)).toMatchObject({ status: 'SUCCEEDED' });
    expect(await p.status(b!)).toMatchObject({ status: 'SKIPPED', note: 'flight-deleted' });
    const f = (await readFlight(pg.db, '3032'))!;
    expect(f).toMatchObject({ status: 'DELETED', stateVersion: 2 });
    expect((await schdEvents('3032')).at(-1)).toMatchObject({ event_type: 'TOMBSTONE', state_version: 2, value: null });
  });

  it('a FLOP moving a flight to another operation day is a protocol error', async () => {
    const [id] = await p.post(flop('UPDT', { seqn: seq++ }, flight({ FLID: '3033', OPDY: '20261130' })));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'DEAD', error_class: 'PROTOCOL' });
  });

  it('applies a FLOP in at most 5 queries', async () => {
    const config = testConfig();
    const message = decode(flop('GATE', { seqn: seq++ }, flight({ FLID: '3034', ETOT: '20261129101500', GATE: items('C3') })), {
      timezone: config.timezone,
    });
    const before = (await readFlight(pg.db, '3034'))!;
    let n = 0;
    const result = await pg.db.tx(async (tx) => {
      const counting: Queryable = { query: (sql, params) => (n++, tx.query(sql, params)) };
      return flopProcessor({ tx: counting, msgId: 99999, message, now: new Date(), config });
    });
    expect(n).toBeLessThanOrEqual(5);
    // The few queries did the whole job: the change is applied, stored, and one version made.
    expect(result).toEqual({ status: 'SUCCEEDED' });
    const after = (await readFlight(pg.db, '3034'))!;
    expect(after.stateVersion).toBe(before.stateVersion + 1);
    expect(after.lastMsgId).toBe(99999);
    expect(after.scalars.ETOT).toBe('20261129101500');
    const last = (await schdEvents('3034')).at(-1)!;
    expect(last.state_version).toBe(after.stateVersion);
    expect(JSON.parse(last.value!)).toMatchObject({ FLID: '3034', ETOT: '20261129101500', GATE: items('C3') });
  });

  // Last: a FAILED head holds the pipeline.
  it('an unknown STYP is FAILED(UNSUPPORTED), not malformed', async () => {
    const [id] = await p.post(flop('WXYZ', { seqn: seq++ }, flight({ FLID: '3035', ETOT: '20261129101500' })));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'FAILED', error_class: 'UNSUPPORTED' });
    expect((await p.status(id!))?.error_detail).toMatch(/WXYZ/);
  });
});
