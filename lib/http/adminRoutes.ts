import { deadEvents, pendingByTarget } from '../outbox/routes.ts';
import { replayDeadEvents } from '../outbox/replay.ts';
import { isPaused, setPaused } from '../pipeline/pause.ts';
import { listDead, pipelineStats } from '../pipeline/procState.ts';
import { parseReplayRequest, replayMessages } from '../pipeline/replay.ts';
import { actorOf } from '../pipeline/routes.ts';
import { RequestError } from '../shared/errors.ts';
import { deadTxMessages } from '../txmsg/dead.ts';
import { txCountsByStatus } from '../txmsg/stats.ts';
import { json, parseJsonBody } from './router.ts';
import type { HttpRequest, Route } from './types.ts';

/** Operator routes that span domains: stats, dead letters, replay, pause. */
export const adminRoutes: Route[] = [
  {
    method: 'GET',
    path: '/admin/stats',
    admin: true,
    async handle(_req, ctx) {
      const now = ctx.clock.now();
      const [paused, pipeline, events, txmsg] = await Promise.all([
        isPaused(ctx.db),
        pipelineStats(ctx.db, now),
        pendingByTarget(ctx.db, now),
        txCountsByStatus(ctx.db),
      ]);
      return json(200, { at: now.toISOString(), paused, pipeline, events, txmsg });
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
      if (kind === 'event') return json(200, { kind, items: await deadEvents(ctx.db, { target: req.query.target, limit }) });
      if (kind === 'txmsg') return json(200, { kind, items: await deadTxMessages(ctx.db, { limit }) });
      throw new RequestError(400, 'invalid_request', `kind must be proc, event or txmsg (got ${kind})`);
    },
  },
  {
    method: 'POST',
    path: '/admin/replay',
    admin: true,
    async handle(req, ctx) {
      const { kind, ...rest } = parseJsonBody(req) as Record<string, unknown>;
      const now = ctx.clock.now();
      if (kind === 'proc') return json(200, await replayMessages(ctx.db, parseReplayRequest(rest), actorOf(req.headers), now));
      if (kind === 'event') return json(200, await replayEvents(req, rest, ctx.db, now));
      throw new RequestError(400, 'invalid_request', `kind must be "proc" or "event" (got ${String(kind)})`);
    },
  },
  pauseRoute('/admin/pause', true),
  pauseRoute('/admin/resume', false),
];

async function replayEvents(req: HttpRequest, body: Record<string, unknown>, db: Parameters<typeof replayDeadEvents>[0], now: Date) {
  const ids = body.ids;
  if (ids !== undefined && (!Array.isArray(ids) || !ids.every((i) => Number.isSafeInteger(i) && i > 0)))
    throw new RequestError(400, 'invalid_request', 'ids: must be a list of positive event IDs');
  if (body.target !== undefined && typeof body.target !== 'string') throw new RequestError(400, 'invalid_request', 'target: must be a string');
  if (!ids && !body.target) throw new RequestError(400, 'invalid_request', 'body: name a target or a non-empty list of ids');
  const r = await replayDeadEvents(
    db,
    { ids: ids as number[] | undefined, target: body.target as string | undefined, dryRun: body.dryRun === true, actor: actorOf(req.headers) },
    { now },
  );
  // Same shape as the proc replay, so the console and CLI render both alike.
  return {
    dryRun: r.dryRun,
    moved: r.replayed.map((eventId) => ({ eventId })),
    refused: r.skipped,
    warnings: r.replayed.length ? ['a replayed event reaches consumers after events sent while it was dead; consumers dedupe by msgx-event-id'] : [],
  };
}

function pauseRoute(path: string, paused: boolean): Route {
  return {
    method: 'POST',
    path,
    admin: true,
    async handle(req, ctx) {
      await setPaused(ctx.db, paused, actorOf(req.headers), ctx.clock.now());
      return json(200, { paused });
    },
  };
}
