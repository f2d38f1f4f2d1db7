import { z } from 'zod';
import { parseJsonWith } from '../http/bodySchema.ts';
import { idParam } from '../http/params.ts';
import { json } from '../http/router.ts';
import type { Route } from '../http/types.ts';
import { calendarDayProblem } from '../shared/calendarDay.ts';
import { lazy } from '../shared/lazy.ts';
import { RequestError } from '../shared/errors.ts';
import { requestDay, requestReference } from './send.ts';
import { getRequest } from './track.ts';

/** `{"day":"yyyyMMdd"}` (a number is read as its digits) or `{"rtype":"…"}`; nothing else. */
const requestSchema = lazy(() =>
  z
    .object({
      day: z
        .union([z.string(), z.number().int().nonnegative()], 'must be a day yyyyMMdd')
        .transform(String)
        .superRefine((d, c) => {
          const problem = calendarDayProblem(d);
          if (problem) c.addIssue({ code: 'custom', message: problem });
        })
        .optional(),
      rtype: z.string().optional(),
    })
    .strict()
    .refine((b) => (b.day === undefined) !== (b.rtype === undefined), {
      message: 'send exactly one of {"day":"yyyyMMdd"} and {"rtype":"…"}',
    }),
);

/** Operator routes: trigger an RQFD for a day (or an RQRF for a reference type). */
export const requestRoutes: Route[] = [
  {
    method: 'POST',
    path: '/admin/requests',
    admin: true,
    async handle(req, ctx) {
      const { day, rtype } = parseJsonWith(req, requestSchema());
      return json(200, rtype !== undefined ? await requestReference(ctx, rtype) : await requestDay(ctx, day!));
    },
  },
  {
    method: 'GET',
    path: '/admin/requests/{id}',
    admin: true,
    async handle(req, ctx) {
      const id = idParam(req, 'id');
      const r = await getRequest(ctx.db, id);
      if (!r) throw new RequestError(404, 'not_found', `no request ${id}`);
      const iso = (d: Date | null) => (d ? d.toISOString() : null);
      return json(200, {
        id: r.id,
        kind: r.kind,
        scope: r.scope,
        sender: r.sender,
        receiver: r.receiver,
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
