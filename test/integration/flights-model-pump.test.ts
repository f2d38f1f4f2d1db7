import { afterAll, beforeAll, expect, it } from 'vitest';
import { RESOURCE_KINDS } from '../../lib/codec/vocabulary.ts';
import { flightJson } from '../../lib/flights/json.ts';
import { readFlightsOfDay } from '../../lib/flights/store.ts';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { flightPipeline } from '../fixtures/messages/pump.ts';
import { rng } from '../helpers/rng.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * A day plan of 2,000 flights, then 20,000 random FLOPs written into the mailbox and run through
 * the REAL pump (poller, group commit of 100 with the group-shared flight unit and deferred
 * writes, the flight processors from the registry) must give exactly the state an independent
 * in-memory model computes by hand: per flight the JSON and the version, per message whether it
 * changed anything; and the newest msgx.schd event per flight must hold exactly that state.
 */
let pg: TestPg;
beforeAll(async () => (pg = await freshPg()));
afterAll(async () => pg?.drop());

const FLIGHTS = 2000;
const FLOPS = 20000;
const DAY = '20261129';

type Fields = Record<string, string | Record<string, string>[]>;
interface ModelFlight {
  json: Record<string, unknown>;
  version: number;
}

it('2,000 flights and 20,000 FLOPs match the in-memory model, and schd events hold the latest state', async () => {
  const p = await flightPipeline(pg, { MSGX_GROUP_COMMIT: '100' });
  const rand = rng(42);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const model = new Map<string, ModelFlight>();
  const flids = Array.from({ length: FLIGHTS }, (_, i) => String(100000 + i));

  // The plan.
  const planFlights = flids.map((id) => ({ FLID: id, OPDY: DAY, AWCD: 'CZ', FLNO: id.slice(-4), STAT: 'SCH' }));
  for (const f of planFlights) {
    const json: Record<string, unknown> = { ...f, ...Object.fromEntries(RESOURCE_KINDS.map((k) => [k, []])), status: 'ACTIVE' };
    model.set(f.FLID, { json, version: 1 });
  }
  const texts = [schd('DNLD', { seqn: 1, dttm: '20261129050000', opdy: DAY, flights: planFlights.map(flight) })];
  /** Per FLOP (in mailbox order): whether the model says it changes its flight. */
  const changes: boolean[] = [];

  // The FLOPs, from small value domains so that many change nothing.
  const times = ['20261129100000', '20261129101500', '20261129103000', ''];
  const codes = ['A1', 'A2', 'B7', 'C3'];
  const gen: Record<string, () => Fields> = {
    ETOT: () => ({ ETOT: pick(times) }),
    ATOT: () => ({ ATOT: pick(times) }),
    ELDT: () => ({ ELDT: pick(times) }),
    STAT: () => ({ STAT: pick(['SCH', 'BOR', 'DEP', 'DLY']) }),
    CANX: () => ({ CANX: pick(['Y', 'N']), STAT: 'CNL' }),
    GATE: () => ({ GATE: rand() < 0.2 ? [] : [{ CODE: pick(codes), BEG: pick(times), END: pick(times) }] }),
    STND: () => ({ STND: [{ CODE: pick(['201', '202']), BEG: pick(times), END: '' }] }),
    CHKC: () => ({
      CHKC:
        rand() < 0.5
          ? [
              { CODE: 'K1', BEG: '', END: '' },
              { CODE: 'K2', BEG: '', END: '' },
            ]
          : [{ CODE: pick(['K1', 'K3']), BEG: '', END: '' }],
    }),
    DLAY: () => ({ DLAY: [{ CODE: pick(['81', '93']), MIN: pick(['005', '010']) }] }),
    // ROUT and ERUT are two collections keyed by the same leg numbers: one must never touch the other.
    ROUT: () =>
      pick<Fields>([
        {
          ROUT: [
            { SEQ: '1', APCD: 'CAN' },
            { SEQ: '2', APCD: pick(['PEK', 'SHA']) },
          ],
        },
        {
          ERUT:
            rand() < 0.2
              ? []
              : [
                  { SEQ: '1', APCD: 'CAN' },
                  { SEQ: '2', APCD: pick(['WUH', 'SHA']) },
                ],
        },
        {
          ROUT: [{ SEQ: '1', APCD: pick(['CAN', 'SZX']) }],
          ERUT: [
            { SEQ: '1', APCD: 'CAN' },
            { SEQ: '2', APCD: 'PEK' },
          ],
        },
      ]),
    UPDT: () => ({ XREM: pick(['a', 'b']), TERM: pick(['T1', 'T2']) }),
  };
  const styps = Object.keys(gen);
  for (let i = 0; i < FLOPS; i++) {
    const flid = pick(flids);
    const styp = pick(styps);
    const fields = gen[styp]!();
    texts.push(flop(styp, { seqn: 1000 + i }, flight({ FLID: flid, ...fields })));
    // The model, by hand: scalars present are set, a collection present replaces, then bump if changed.
    const m = model.get(flid)!;
    const next = { ...m.json, ...fields };
    const changed = JSON.stringify(next) !== JSON.stringify(m.json);
    changes.push(changed);
    if (changed) {
      m.json = next;
      m.version++;
    }
  }

  // Into the mailbox as other systems write it (multi-row INSERTs keep it quick), then the pump.
  const ids: number[] = [];
  for (let i = 0; i < texts.length; i += 1000) {
    const chunk = texts.slice(i, i + 1000);
    const r = await pg.db.query<{ ID: number }>(`INSERT INTO "CMINMSGS" ("MSG_TEXT") SELECT unnest($1::text[]) RETURNING "ID"`, [chunk]);
    ids.push(...r.rows.map((x) => Number(x.ID)).sort((a, b) => a - b));
  }
  await p.drain();

  // Every message SUCCEEDED; exactly those the model says change nothing are noted "unchanged".
  const proc = await pg.db.query<{ msg_id: number; status: string; note: string | null }>(
    `SELECT msg_id, status, note FROM proc_state ORDER BY msg_id`,
  );
  expect(proc.rows.map((r) => Number(r.msg_id))).toEqual(ids);
  const wrongOutcome = proc.rows
    .slice(1)
    .map((r, i) => ({ r, want: changes[i] ? null : 'unchanged' }))
    .filter(({ r, want }) => r.status !== 'SUCCEEDED' || r.note !== want)
    .map(({ r, want }) => `message ${r.msg_id}: ${r.status} ${r.note}, model says ${want ?? 'changed'}`);
  expect(proc.rows[0]!.status).toBe('SUCCEEDED');
  expect(wrongOutcome.slice(0, 5)).toEqual([]);

  const stored = await readFlightsOfDay(pg.db, DAY);
  expect(stored.length).toBe(FLIGHTS);
  const mismatches: string[] = [];
  for (const f of stored) {
    const { updatedAt: _u, stateVersion, ...json } = flightJson(f);
    const m = model.get(f.flid)!;
    if (JSON.stringify(sortKeys(json)) !== JSON.stringify(sortKeys(m.json)) || stateVersion !== m.version)
      mismatches.push(`${f.flid}: stored v${stateVersion} ${JSON.stringify(json)} model v${m.version} ${JSON.stringify(m.json)}`);
  }
  expect(mismatches.slice(0, 3)).toEqual([]);

  // msgx.schd: one upsert per version, and the newest per flight is exactly the stored state.
  const ev = await pg.db.query<{ flid: string; n: number; last: string; max_version: number }>(
    `SELECT flid, count(*)::int AS n, max(state_version) AS max_version,
            (array_agg(value ORDER BY event_id DESC))[1] AS last
     FROM msg_event WHERE target = 'schd' GROUP BY flid`,
  );
  expect(ev.rows.length).toBe(FLIGHTS);
  const byFlid = new Map(stored.map((f) => [f.flid, f]));
  for (const row of ev.rows) {
    const f = byFlid.get(row.flid)!;
    expect(row.n).toBe(f.stateVersion);
    expect(row.max_version).toBe(f.stateVersion);
    expect(JSON.parse(row.last)).toEqual({ v: 1, ...flightJson(f) });
  }
}, 300_000);

function sortKeys(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));
}
