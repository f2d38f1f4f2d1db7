import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshPg, type TestPg, waitFor } from '../helpers/services.ts';
import { killTwins, startTwin, type Twin } from '../helpers/twinChild.ts';

/**
 * Journey: a client of the system msgx replaces reads every flight through its query route,
 * `GET /all/flights`, page by page. Day plans for two days and an FDEL go in through
 * `POST /cminmsgs/send`; the pages are judged against the flights this test sent (day, FLID,
 * FLNO, status, version), each once, in (day, FLID) order.
 *
 * Caught on main: `/all/flights` answered 404.
 */
let pg: TestPg;
let twin: Twin;

beforeAll(async () => {
  pg = await freshPg({ migrate: false });
  twin = await startTwin({ MSGX_PG_URL: pg.url }, mkdtempSync(join(tmpdir(), 'msgx-allflights-')));
}, 180_000);
afterAll(async () => {
  await twin?.stop('SIGTERM', { killAfterMs: 10_000 });
  killTwins();
  await pg?.drop();
});

let seqn = 1;
const meta = (type: string, styp: string) =>
  `<META><SNDR>FIMS</SNDR><RCVR>MSGX</RCVR><SEQN>${seqn++}</SEQN><DTTM>20261129083000</DTTM><TYPE>${type}</TYPE><STYP>${styp}</STYP></META>`;
const plan = (day: string, flights: [string, string][]) =>
  `<MSG>${meta('SCHD', 'DNLD')}<SCHD><OPDY>${day}</OPDY><CNT>${flights.length}</CNT>${flights
    .map(([flid, flno]) => `<FLIGHT><FLID>${flid}</FLID><OPDY>${day}</OPDY><AWCD>CZ</AWCD><FLNO>${flno}</FLNO></FLIGHT>`)
    .join('')}</SCHD></MSG>`;
const send = async (xml: string) =>
  expect(
    (await fetch(`${twin.base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: xml })).status,
  ).toBe(200);

it('pages through every flight of every day, each once, as sent', { timeout: 120_000 }, async () => {
  // The model: what this test sends, and what each flight must then be.
  const model = [
    { FLID: '7102', OPDY: '20261129', FLNO: '0102', status: 'ACTIVE', stateVersion: 1 },
    { FLID: '7105', OPDY: '20261129', FLNO: '0105', status: 'DELETED', stateVersion: 2 },
    { FLID: '7101', OPDY: '20261130', FLNO: '0101', status: 'ACTIVE', stateVersion: 1 },
    { FLID: '7103', OPDY: '20261130', FLNO: '0103', status: 'ACTIVE', stateVersion: 1 },
    { FLID: '7104', OPDY: '20261130', FLNO: '0104', status: 'ACTIVE', stateVersion: 1 },
  ];
  await send(
    plan('20261130', [
      ['7103', '0103'],
      ['7101', '0101'],
      ['7104', '0104'],
    ]),
  );
  await send(
    plan('20261129', [
      ['7105', '0105'],
      ['7102', '0102'],
    ]),
  );
  await send(`<MSG>${meta('FDEL', 'DEL')}<FDEL><FLIGHT><FLID>7105</FLID></FLIGHT></FDEL></MSG>`);

  const pageAll = async () => {
    const seen: Record<string, unknown>[] = [];
    let after: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const res = await fetch(`${twin.base}/all/flights?limit=2${after ? `&after=${after}` : ''}`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { flights: Record<string, unknown>[]; next: string | null };
      seen.push(...body.flights);
      after = body.next;
      if (!after) break;
    }
    return seen.map(({ FLID, OPDY, FLNO, status, stateVersion }) => ({ FLID, OPDY, FLNO, status, stateVersion }));
  };
  await waitFor(async () => JSON.stringify(await pageAll()) === JSON.stringify(model), {
    what: 'every flight as sent, in (day, FLID) order',
    timeoutMs: 60_000,
    intervalMs: 300,
  });
  expect(await pageAll()).toEqual(model);
  const bad = await fetch(`${twin.base}/all/flights?day=yesterday`);
  expect(bad.status).toBe(400);
  expect(((await bad.json()) as { detail: string }).detail).toMatch(/^day: /);
});
