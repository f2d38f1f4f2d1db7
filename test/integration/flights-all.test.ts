import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flightRoutes } from '../../lib/flights/routes.ts';
import { Router } from '../../lib/http/router.ts';
import { fdel, flight, schd } from '../fixtures/messages/build.ts';
import { runDirect } from '../fixtures/messages/run.ts';
import { makeContext } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';

/**
 * GET /all/flights (docs/flights.md "Read API"), the query route of the system msgx replaces:
 * every flight, any day, paged by (day, FLID), through the real router on PostgreSQL. Red before
 * the route existed (404 for every call).
 */
let pg: TestPg;
let router: Router;
let ctx: ReturnType<typeof makeContext>;
const now = new Date('2026-11-29T01:00:00Z');
let seq = 1;
const plan = (day: string, flids: string[]) =>
  schd('DNLD', { seqn: seq++, dttm: `${day}080000`, opdy: day, flights: flids.map((id) => flight({ FLID: id, OPDY: day, FLNO: id })) });

beforeAll(async () => {
  pg = await freshPg();
  ctx = makeContext({ db: pg.db, mailbox: new PgMailbox(pg.db) });
  router = new Router(flightRoutes);
  await runDirect(pg.db, plan('20261130', ['B2', 'A1']), { now });
  await runDirect(pg.db, plan('20261129', ['C3', 'Z9', 'D4']), { now });
  await runDirect(pg.db, fdel({ seqn: seq++ }, 'Z9'), { now });
});
afterAll(async () => pg?.drop());

const get = async (query: Record<string, string>) =>
  router.handle({ method: 'GET', path: '/all/flights', headers: {}, query, body: '', params: {}, isAdmin: false }, ctx) as Promise<{
    status: number;
    body: {
      count: number;
      flights: { FLID: string; OPDY: string; status: string }[];
      next: string | null;
      error?: string;
      detail?: string;
    };
  }>;
const ids = (b: { flights: { FLID: string }[] }) => b.flights.map((f) => f.FLID);

describe('GET /all/flights', () => {
  it('answers every flight msgx holds, by day then FLID, DELETED ones with their status, in the read API shape', async () => {
    const r = await get({});
    expect(r.status).toBe(200);
    expect(ids(r.body)).toEqual(['C3', 'D4', 'Z9', 'A1', 'B2']);
    expect(r.body).toMatchObject({ count: 5, next: null });
    expect(r.body.flights[2]).toMatchObject({ FLID: 'Z9', OPDY: '20261129', status: 'DELETED', stateVersion: 2 });
    expect(r.body.flights[3]).toMatchObject({ FLID: 'A1', OPDY: '20261130', FLNO: 'A1', status: 'ACTIVE', stateVersion: 1, GATE: [] });
  });

  it('pages with limit and the next cursor until next is null, each flight once', async () => {
    const seen: string[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const r = await get({ limit: '2', ...(after ? { after } : {}) });
      seen.push(...ids(r.body));
      if (r.body.next === null) break;
      after = r.body.next;
    }
    expect(seen).toEqual(['C3', 'D4', 'Z9', 'A1', 'B2']);
  });

  it('narrows to a day and a status', async () => {
    expect(ids((await get({ day: '20261129' })).body)).toEqual(['C3', 'D4', 'Z9']);
    expect(ids((await get({ day: '20261129', status: 'ACTIVE' })).body)).toEqual(['C3', 'D4']);
    expect(ids((await get({ status: 'DELETED' })).body)).toEqual(['Z9']);
    expect((await get({ day: '20261201' })).body).toMatchObject({ count: 0, flights: [], next: null });
  });

  it.each([
    [{ day: '2026-11-29' }, /^day: must be a day yyyyMMdd/],
    [{ day: '20260230' }, /^day: 20260230 is not a calendar date/],
    [{ status: 'GONE' }, /^status: must be ACTIVE or DELETED/],
    [{ limit: '0' }, /^limit: must be at least 1/],
    [{ limit: '1001' }, /^limit: must be at most 1000/],
    [{ after: 'not-a-cursor' }, /^after: must be the `next` value of the previous page/],
  ])('refuses %o with 400 naming the parameter', async (query, detail) => {
    const r = await get(query);
    expect(r.status).toBe(400);
    expect(r.body.detail).toMatch(detail);
  });
});
