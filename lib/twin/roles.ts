import type { HealthCheck } from '../http/health.ts';
import { dispatcherRole, pollerRole, pumpRole, type RoleSpec, sweepRole } from '../jobs/roles.ts';
import { runWorker } from '../jobs/worker.ts';
import { buildPublishers, closePublishers } from '../outbox/publishers/index.ts';
import { kafkaHealth } from '../outbox/health.ts';
import { ensureTopics } from '../outbox/topics.ts';
import type { AppContext } from '../shared/context.ts';

/**
 * Runs every scheduled role of the cloud continuously in this process. A role whose lock another
 * process holds (a second twin on the same database) keeps trying at its poll interval.
 */
export async function startRoles(
  ctx: AppContext,
  signal: AbortSignal,
): Promise<{ done: Promise<unknown>; close: () => Promise<void>; healthChecks: Record<string, HealthCheck> }> {
  const topics = await ensureTopics(ctx.config, [], { log: ctx.log });
  if (topics.created.length) ctx.log.info('topics created', { topics: topics.created });
  for (const w of topics.warnings) ctx.log.warn(w);
  const publishers = buildPublishers(ctx.config, { log: ctx.log, clock: ctx.clock });
  const specs: RoleSpec[] = [pollerRole(ctx), pumpRole(ctx), dispatcherRole(ctx, publishers), sweepRole(ctx)];
  const done = Promise.all(specs.map((spec) => runForever(ctx, spec, signal)));
  return { done, close: () => closePublishers(publishers), healthChecks: kafkaHealth(ctx.config) };
}

async function runForever(ctx: AppContext, spec: RoleSpec, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      await runWorker(ctx, { ...spec, signal });
    } catch (err) {
      ctx.log.error('role stopped with an error; restarting', { role: spec.role, error: err as Error });
    }
    if (!signal.aborted) await ctx.clock.sleep(ctx.config.pipeline.pollIntervalMs, signal);
  }
}
