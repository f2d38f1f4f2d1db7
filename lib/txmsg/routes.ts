import { json, parseJsonBody } from '../http/router.ts';
import { actorOf } from '../http/actor.ts';
import type { Route } from '../http/types.ts';
import { runAction, type TxAction } from './actions.ts';
import { TxNotFoundError } from './errors.ts';
import { prepare } from './prepare.ts';
import { resend } from './resend.ts';
import { findMessage } from './store.ts';
import { readTrace } from './trace.ts';
import { timedCommand } from './timing.ts';
import { toView } from './view.ts';

const action = (name: TxAction): Route => ({
  method: 'POST',
  path: `/v1/tx-messages/{id}/${name}`,
  async handle(req, ctx) {
    const id = req.params.id!;
    return json(200, await timedCommand(ctx.log, name, id, () => runAction(ctx, id, name)));
  },
});

/** The transactional message API (docs/txmsg.md "API"); the lead mounts these in the twin and the ingress. */
export const txmsgRoutes: Route[] = [
  {
    method: 'POST',
    path: '/v1/tx-messages',
    async handle(req, ctx) {
      const { row, created } = await timedCommand(ctx.log, 'prepare', undefined, async () => {
        const r = await prepare(ctx, parseJsonBody(req), req.headers['idempotency-key']);
        return { ...r, id: r.row.id, status: r.row.status };
      });
      return json(created ? 201 : 200, { id: row.id, status: row.status });
    },
  },
  action('commit'),
  action('rollback'),
  action('ack'),
  {
    method: 'GET',
    path: '/v1/tx-messages/{id}',
    async handle(req, ctx) {
      const row = await findMessage(ctx.db, req.params.id!);
      if (!row) throw new TxNotFoundError(req.params.id!);
      return json(200, toView(row));
    },
  },
  {
    method: 'POST',
    path: '/admin/tx-messages/{id}/resend',
    admin: true,
    async handle(req, ctx) {
      const id = req.params.id!;
      return json(200, await timedCommand(ctx.log, 'resend', id, () => resend(ctx, id, actorOf(req))));
    },
  },
  {
    method: 'GET',
    path: '/admin/tx-messages/{id}/trace',
    admin: true,
    async handle(req, ctx) {
      const id = req.params.id!;
      const row = await findMessage(ctx.db, id);
      if (!row) throw new TxNotFoundError(id);
      const trace = await readTrace(ctx.db, id);
      return json(200, { message: { ...toView(row), deadPhase: row.dead_phase }, trace });
    },
  },
];
