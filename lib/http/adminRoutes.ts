import { z } from 'zod';
import { deadEvents, deadEventsByTarget, pendingByTarget } from '../outbox/queries.ts';
import { deliveryProblems } from '../outbox/problems.ts';
import { replayDeadEvents } from '../outbox/replay.ts';
import { orderingStats } from '../pipeline/frontier.ts';
import { isPaused, setPaused } from '../pipeline/pause.ts';
import { listDead, pipelineStats } from '../pipeline/procState.ts';
import { MAX_REPLAY_IDS, parseReplayRequest, replayMessages } from '../pipeline/replay.ts';
import { RequestError } from '../shared/errors.ts';
import { lazy } from '../shared/lazy.ts';
import { deadTxMessages } from '../txmsg/dead.ts';
import { txCountsByStatus } from '../txmsg/stats.ts';
import { actorOf } from './actor.ts';
import { parseFields, parseJsonWith } from './bodySchema.ts';
import { InvalidFieldError } from './errors.ts';
import { intParam, parseQuery } from './query.ts';
import { json, parseJsonObject } from './router.ts';
import type { HttpRequest, Route } from './types.ts';

/** Built on the first `GET /admin/dead`, not at every ingress cold start. */
const deadQuery = lazy(() =>
  z.object({
    kind: z.enum(['proc', 'event', 'txmsg'], 'must be proc, event or txmsg').default('proc'),
    limit: intParam(1, 1000, 100),
    errorClass: z.string().max(40).optional(),
    target: z.string().max(200).optional(),
    // kind=txmsg only: where the message died, and its topic; `after`: the last id of the page before.
    phase: z.enum(['check', 'delivery'], 'must be check or delivery').optional(),
    topic: z.string().min(1).max(249).optional(),
    after: z.string().min(1).max(64).optional(),
  }),
);

/** `POST /admin/replay` with kind `event`: the same rules as a message replay (an ID cap, no unknown fields). */
const eventReplaySchema = lazy(() =>
  z
    .object({
      ids: z
        .array(z.number().int().positive().max(Number.MAX_SAFE_INTEGER))
        .min(1, 'must name at least one event')
        .max(MAX_REPLAY_IDS, `at most ${MAX_REPLAY_IDS} ids per call`)
        .optional(),
      target: z.string().min(1).max(200).optional(),
      dryRun: z.boolean().default(false),
    })
    .strict()
    .refine((b) => b.ids !== undefined || b.target !== undefined, { message: 'name a target or a non-empty list of ids' }),
);

/** Bodies of actions that take no arguments: none, or `{}`. */
const NO_FIELDS = lazy(() => z.object({}).strict());

/** Operator routes that span domains: stats, dead letters, replay, pause. */
export const adminRoutes: Route[] = [
  {
    method: 'GET',
    path: '/admin/stats',
    admin: true,
    async handle(_req, ctx) {
      const now = ctx.clock.now();
      const [paused, pipeline, ordering, events, deadEventsPerTarget, txmsg] = await Promise.all([
        isPaused(ctx.db),
        pipelineStats(ctx.db, now),
        orderingStats(ctx.db, now),
        pendingByTarget(ctx.db, now),
        deadEventsByTarget(ctx.db),
        txCountsByStatus(ctx.db),
      ]);
      // Delivery that is not progressing, said plainly: stalled, stale and topic-less targets.
      const problems = await deliveryProblems(ctx, events);
      return json(200, { at: now.toISOString(), paused, pipeline, ordering, events, deadEvents: deadEventsPerTarget, txmsg, ...problems });
    },
  },
  {
    method: 'GET',
    path: '/admin/dead',
    admin: true,
    async handle(req, ctx) {
      const { kind, limit, errorClass, target, phase, topic, after } = parseQuery(req, deadQuery());
      const txOnly = Object.entries({ phase, topic, after }).find(([, v]) => v !== undefined)?.[0];
      if (txOnly && kind !== 'txmsg') throw new RequestError(400, 'invalid_request', `${txOnly}: only with kind=txmsg`);
      if (kind === 'proc') return json(200, { kind, items: await listDead(ctx.db, { errorClass, limit }) });
      if (kind === 'event') return json(200, { kind, items: await deadEvents(ctx.db, { target, limit }) });
      return json(200, { kind, items: await deadTxMessages(ctx.db, { phase, topic, after, limit }) });
    },
  },
  {
    method: 'POST',
    path: '/admin/replay',
    admin: true,
    async handle(req, ctx) {
      const { kind, ...rest } = parseJsonObject(req);
      const now = ctx.clock.now();
      if (kind === 'proc') return json(200, await replayMessages(ctx.db, parseReplayRequest(rest), actorOf(req), now));
      if (kind === 'event') return json(200, await replayEvents(req, rest, ctx.db, now));
      throw new InvalidFieldError('kind', `must be "proc" or "event" (got ${JSON.stringify(kind ?? null)?.slice(0, 60)})`);
    },
  },
  pauseRoute('/admin/pause', true),
  pauseRoute('/admin/resume', false),
];

async function replayEvents(req: HttpRequest, body: Record<string, unknown>, db: Parameters<typeof replayDeadEvents>[0], now: Date) {
  const { ids, target, dryRun } = parseFields(eventReplaySchema(), body);
  const r = await replayDeadEvents(db, { ids, target, dryRun, actor: actorOf(req) }, { now });
  // Same shape as the proc replay, so the console and CLI render both alike.
  return {
    dryRun: r.dryRun,
    moved: r.replayed.map((eventId) => ({ eventId })),
    refused: r.skipped,
    warnings: r.replayed.length
      ? ['a replayed event reaches consumers after events sent while it was dead; consumers dedupe by msgx-event-id']
      : [],
  };
}

/**
 * Pause and resume: the only way to switch the pause flag (the CLI and the console call these).
 * Paused means no head processing; ingress, delivery, check-backs and maintenance go on.
 */
function pauseRoute(path: string, paused: boolean): Route {
  return {
    method: 'POST',
    path,
    admin: true,
    async handle(req, ctx) {
      parseJsonWith(req, NO_FIELDS(), { emptyOk: true });
      // The flag and its audit record commit together (docs/deploy.md "Pause").
      const r = await ctx.db.tx((q) => setPaused(q, paused, actorOf(req), ctx.clock.now()));
      return json(200, r);
    },
  };
}
