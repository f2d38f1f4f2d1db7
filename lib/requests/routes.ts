import { json, parseJsonBody } from '../http/router.ts';
import type { Route } from '../http/types.ts';
import { RequestError } from '../shared/errors.ts';
import { requestDay, requestReference } from './send.ts';
import { getRequest } from './track.ts';

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
  {
    method: 'GET',
    path: '/admin/requests/{id}',
    admin: true,
    async handle(req, ctx) {
      const raw = req.params.id!;
      const r = /^\d{1,15}$/.test(raw) ? await getRequest(ctx.db, Number(raw)) : undefined;
      if (!r) throw new RequestError(404, 'not_found', `no request ${raw}`);
      const iso = (d: Date | null) => (d ? d.toISOString() : null);
      return json(200, {
        id: r.id,
        kind: r.kind,
        scope: r.scope,
        status: r.status,
        registeredAt: iso(r.registered_at),
        sentAt: iso(r.sent_at),
        outboundId: r.outbound_id,
        closedAt: iso(r.closed_at),
        closeReason: r.close_reason,
        respMsgId: r.resp_msg_id,
        audit: r.audit,
      });
    },
  },
];
