import { json } from '../http/router.ts';
import type { Route } from '../http/types.ts';
import { RequestError } from '../shared/errors.ts';
import { flightJson } from './json.ts';
import { readFlight, readFlightsOfDay } from './store.ts';

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
];
