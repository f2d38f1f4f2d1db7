import { json, parseJsonBody } from '../http/router.ts';
import type { Route } from '../http/types.ts';
import { RequestError } from '../shared/errors.ts';
import { requestDay, requestReference } from './send.ts';

/** Operator routes: trigger an RQFD for a day (or an RQRF for a reference type). */
export const requestRoutes: Route[] = [
  {
    method: 'POST',
    path: '/admin/requests',
    admin: true,
    async handle(req, ctx) {
      const body = parseJsonBody(req) as { day?: unknown; rtype?: unknown } | null;
      if (body && typeof body.rtype === 'string') return json(200, await requestReference(ctx, body.rtype));
      const day = body && typeof body.day === 'string' ? body.day : typeof body?.day === 'number' ? String(body.day) : undefined;
      if (!day) throw new RequestError(400, 'invalid_request', 'body {"day":"YYYYMMDD"} is required');
      return json(200, await requestDay(ctx, day));
    },
  },
];
