import { setPaused, isPaused } from '../pipeline/pause.ts';
import { listDead, pipelineStats } from '../pipeline/procState.ts';
import { parseReplayRequest, replayMessages } from '../pipeline/replay.ts';
import { actorOf } from '../pipeline/routes.ts';
import { RequestError } from '../shared/errors.ts';
import { json, parseJsonBody } from './router.ts';
import type { Route } from './types.ts';

/** Operator routes that span domains: stats, dead letters, replay, pause. */
export const adminRoutes: Route[] = [
  {
    method: 'GET',
    path: '/admin/stats',
    admin: true,
    async handle(_req, ctx) {
      const now = ctx.clock.now();
      return json(200, { at: now.toISOString(), paused: await isPaused(ctx.db), pipeline: await pipelineStats(ctx.db, now) });
    },
  },
  {
    method: 'GET',
    path: '/admin/dead',
    admin: true,
    async handle(req, ctx) {
      const kind = req.query.kind ?? 'proc';
      const limit = Math.min(Number(req.query.limit ?? 100) || 100, 1000);
      if (kind === 'proc') return json(200, { kind, items: await listDead(ctx.db, { errorClass: req.query.errorClass, limit }) });
      throw new RequestError(400, 'invalid_request', `kind must be proc, event or txmsg (got ${kind})`);
    },
  },
  {
    method: 'POST',
    path: '/admin/replay',
    admin: true,
    async handle(req, ctx) {
      const { kind, ...rest } = parseJsonBody(req) as { kind?: string };
      if (kind === 'proc') return json(200, await replayMessages(ctx.db, parseReplayRequest(rest), actorOf(req.headers), ctx.clock.now()));
      throw new RequestError(400, 'invalid_request', `kind must be "proc" or "event" (got ${String(kind)})`);
    },
  },
  {
    method: 'POST',
    path: '/admin/pause',
    admin: true,
    async handle(req, ctx) {
      await setPaused(ctx.db, true, actorOf(req.headers), ctx.clock.now());
      return json(200, { paused: true });
    },
  },
  {
    method: 'POST',
    path: '/admin/resume',
    admin: true,
    async handle(req, ctx) {
      await setPaused(ctx.db, false, actorOf(req.headers), ctx.clock.now());
      return json(200, { paused: false });
    },
  },
];
