import { json } from '../http/router.ts';
import type { Route } from '../http/types.ts';
import { RequestError } from '../shared/errors.ts';
import { acceptInbound } from './ingress.ts';
import { getProc, listAttempts } from './procState.ts';

export const pipelineRoutes: Route[] = [
  {
    method: 'POST',
    path: '/cminmsgs/send',
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
      const id = Number(req.params.msgId);
      const proc = Number.isSafeInteger(id) ? await getProc(ctx.db, id) : null;
      if (!proc) throw new RequestError(404, 'not_found', `no message ${req.params.msgId}`);
      return json(200, { ...proc, attemptLog: await listAttempts(ctx.db, id) });
    },
  },
];

/** Who asked: the IAM principal or a named operator header; audited with every admin action. */
export function actorOf(headers: Record<string, string>): string {
  return headers['x-msgx-actor'] ?? headers['x-amzn-principal'] ?? 'operator';
}
