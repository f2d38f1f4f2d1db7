import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgDb } from '../../lib/db/pg.ts';
import { applyPatch } from '../../lib/flights/model.ts';
import { FlightStateCache } from '../../lib/flights/stateCache.ts';
import { loadFlightsForUpdate, readFlight, writeFlights } from '../../lib/flights/store.ts';
import { writtenFlightStates } from '../../lib/flights/unit.ts';
import { GroupScope } from '../../lib/pipeline/groupScope.ts';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { flightPipeline } from '../fixtures/messages/pump.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * The pump keeps the flight states it wrote and does not read a flight back while its row is still
 * the version it wrote (lib/flights/stateCache.ts). These tests write the flights in the ways that
 * must make it read them again, and judge by what the messages say the flights must be.
 */
let pg: TestPg;
beforeAll(async () => (pg = await freshPg()));
afterAll(async () => pg?.drop());

const DAY = '20261129';
const plan = (flids: string[], seqn: number) =>
  schd('DNLD', { seqn, dttm: '20261129050000', opdy: DAY, flights: flids.map((id) => flight({ FLID: id, OPDY: DAY, STAT: 'SCH' })) });
const etot = (flid: string, hhmm: string, seqn: number) => flop('ETOT', { seqn }, flight({ FLID: flid, ETOT: `20261129${hhmm}00` }));
const gate = (flid: string, code: string, seqn: number) =>
  flop('GATE', { seqn }, flight({ FLID: flid, GATE: [{ CODE: code, BEG: '', END: '' }] }));

describe('flight states kept between groups', () => {
  it('two pumps taking turns on one database (two Lambda containers) each see what the other wrote', async () => {
    const other = new PgDb(pg.url, { max: 2 });
    try {
      const a = await flightPipeline(pg);
      const b = await flightPipeline({ ...pg, db: other });
      const flids = ['TP1', 'TP2', 'TP3'];
      await a.post(plan(flids, 1));
      await a.drain(); // a now holds every flight at version 1
      // Model: each message below changes its flight, so each one bumps the version by one.
      const want = new Map(flids.map((f) => [f, { version: 1, etot: '', gate: '' }]));
      let seqn = 10;
      const turns = [a, b, a, b, a];
      for (const [turn, p] of turns.entries()) {
        const texts = flids.flatMap((f, i) => {
          const hhmm = `1${turn}${i}0`;
          const code = `G${turn}${i}`;
          const w = want.get(f)!;
          w.version += 2;
          w.etot = `20261129${hhmm}00`;
          w.gate = code;
          return [etot(f, hhmm, seqn++), gate(f, code, seqn++)];
        });
        await p.post(...texts);
        await p.drain();
      }
      for (const f of flids) {
        const got = await readFlight(pg.db, f);
        const w = want.get(f)!;
        expect({ flid: f, version: got?.stateVersion, etot: got?.scalars.ETOT, gates: got?.resources.GATE.map((g) => g.key) }).toEqual({
          flid: f,
          version: w.version,
          etot: w.etot,
          gates: [w.gate],
        });
      }
    } finally {
      await other.close();
    }
  });

  it('a state served from the cache is exactly what reading the row gives', async () => {
    const p = await flightPipeline(pg);
    const flids = ['EQ1', 'EQ2'];
    await p.post(
      plan(flids, 100),
      gate('EQ1', 'B12', 101),
      flop(
        'ROUT',
        { seqn: 102 },
        flight({
          FLID: 'EQ2',
          ROUT: [
            { SEQ: '1', APCD: 'CAN' },
            { SEQ: '2', APCD: 'PEK' },
          ],
        }),
      ),
      etot('EQ2', '0930', 103),
    );
    await p.drain();
    const cache = writtenFlightStates(new GroupScope(pg.db, [], pg.db));
    const [cached, read] = await pg.db.tx(async (tx) => [
      await loadFlightsForUpdate(tx, flids, cache),
      await loadFlightsForUpdate(tx, flids),
    ]);
    expect(cached.size).toBe(2);
    expect(cached).toEqual(read);
  });

  it('a write that rolled back is not served: the flight is read again', async () => {
    const p = await flightPipeline(pg);
    await p.post(plan(['RB1'], 200));
    await p.drain();
    const cache = new FlightStateCache();
    const before = (await pg.db.tx((tx) => loadFlightsForUpdate(tx, ['RB1'], cache))).get('RB1')!;
    const next = {
      ...applyPatch(before, { scalars: { ETOT: '20261129120000' }, resources: {}, extra: [] }),
      stateVersion: before.stateVersion + 1,
    };
    await expect(
      pg.db.tx(async (tx) => {
        await writeFlights(tx, [{ state: next, kinds: [] }], 'UTC', cache);
        throw new Error('the group fails after its flights were written');
      }),
    ).rejects.toThrow('the group fails');
    const after = (await pg.db.tx((tx) => loadFlightsForUpdate(tx, ['RB1'], cache))).get('RB1')!;
    expect({ version: after.stateVersion, etot: after.scalars.ETOT }).toEqual({ version: before.stateVersion, etot: before.scalars.ETOT });
  });

  it('a second write to the row in the same transaction is not hidden behind the first', async () => {
    const p = await flightPipeline(pg);
    await p.post(plan(['TX1'], 300));
    await p.drain();
    const cache = new FlightStateCache();
    const status = await pg.db.tx(async (tx) => {
      const cur = (await loadFlightsForUpdate(tx, ['TX1'], cache)).get('TX1')!;
      await writeFlights(tx, [{ state: { ...cur, stateVersion: cur.stateVersion + 1 }, kinds: [] }], 'UTC', cache);
      // Another statement of the same transaction changes the row again: same xmin, new tuple.
      await tx.query(`UPDATE flight_schd SET status = 'DELETED' WHERE flid = 'TX1'`);
      return (await loadFlightsForUpdate(tx, ['TX1'], cache)).get('TX1')!.status;
    });
    expect(status).toBe('DELETED');
  });
});
