import { z } from 'zod';
import { json } from '../http/router.ts';
import { intParam, parseQuery } from '../http/query.ts';
import type { Route } from '../http/types.ts';
import { calendarDayProblem } from '../shared/calendarDay.ts';
import { lazy } from '../shared/lazy.ts';
import { RequestError } from '../shared/errors.ts';
import { flightJson } from './json.ts';
import { readFlight, readFlightsOfDay, readFlightsPage } from './store.ts';

/** The most flights one page of GET /all/flights holds (a page stays well inside a Lambda answer). */
export const ALL_FLIGHTS_MAX = 1000;

const day = z.string().superRefine((d, c) => {
  const problem = calendarDayProblem(d);
  if (problem) c.addIssue({ code: 'custom', message: problem });
});

/** `after` is the `next` of the previous page: the last flight's day and FLID, base64url JSON. */
const cursor = z.string().transform((text, c): [string, string] => {
  try {
    const v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 2 && v.every((x) => typeof x === 'string')) return v as [string, string];
  } catch {
    // reported below
  }
  c.addIssue({ code: 'custom', message: 'must be the `next` value of the previous page' });
  return z.NEVER;
});

const allFlightsQuery = lazy(() =>
  z.object({
    day: day.optional(),
    status: z.enum(['ACTIVE', 'DELETED'], 'must be ACTIVE or DELETED').optional(),
    after: cursor.optional(),
    limit: intParam(1, ALL_FLIGHTS_MAX, ALL_FLIGHTS_MAX),
  }),
);

const nextOf = (f: { operationDay: string; flid: string }) => Buffer.from(JSON.stringify([f.operationDay, f.flid])).toString('base64url');

/** Read API: the authoritative flight state with its resources and version. */
export const flightRoutes: Route[] = [
  {
    method: 'GET',
    path: '/v1/flights',
    async handle(req, ctx) {
      const day = req.query.day;
      if (!day || !/^\d{8}$/.test(day)) throw new RequestError(400, 'invalid_request', 'query parameter day=YYYYMMDD is required');
      const flights = await readFlightsOfDay(ctx.db, day);
      return json(200, { day, count: flights.length, flights: flights.map(flightJson) });
    },
  },
  {
    method: 'GET',
    path: '/v1/flights/{flid}',
    async handle(req, ctx) {
      const f = await readFlight(ctx.db, req.params.flid!);
      if (!f) throw new RequestError(404, 'not_found', `no flight ${req.params.flid}`);
      return json(200, flightJson(f));
    },
  },
  {
    // The query route of the system msgx replaces (docs/flights.md "Read API"): every flight msgx
    // holds, any day, in pages. The flights are the same objects as /v1/flights answers.
    method: 'GET',
    path: '/all/flights',
    async handle(req, ctx) {
      const q = parseQuery(req, allFlightsQuery());
      const flights = await readFlightsPage(ctx.db, { day: q.day, status: q.status, after: q.after, limit: q.limit });
      const last = flights.at(-1);
      return json(200, {
        count: flights.length,
        flights: flights.map(flightJson),
        next: flights.length === q.limit && last ? nextOf(last) : null,
      });
    },
  },
];
