import { idParam } from '../http/params.ts';
import { json } from '../http/router.ts';
import type { Route } from '../http/types.ts';
import { RequestError } from '../shared/errors.ts';
import { acceptInbound, XML_TYPES } from './ingress.ts';
import { getProc, listAttempts } from './procState.ts';
import { SEND_PATH } from '../constants.ts';

export const pipelineRoutes: Route[] = [
  {
    method: 'POST',
    path: SEND_PATH,
    accepts: XML_TYPES,
    async handle(req, ctx) {
      const { msgId } = await acceptInbound(ctx, req.body, req.headers['content-type']);
      return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: String(msgId) };
    },
  },
  {
    method: 'GET',
    path: '/admin/messages/{msgId}',
    admin: true,
    async handle(req, ctx) {
      const id = idParam(req, 'msgId');
      const proc = await getProc(ctx.db, id);
      if (!proc) throw new RequestError(404, 'not_found', `no message ${id}`);
      return json(200, { ...proc, attemptLog: await listAttempts(ctx.db, id) });
    },
  },
];
