import type { HealthCheck } from '../http/health.ts';
import { dispatcherRole, pollerRole, pumpRole, type RoleSpec, sweepRole } from '../jobs/roles.ts';
import { runWorker } from '../jobs/worker.ts';
import { buildPublishers, closePublishers } from '../outbox/publishers/index.ts';
import { kafkaHealth } from '../outbox/health.ts';
import { describeMissing, missingTopics } from '../outbox/missingTopics.ts';
import { topicForTarget } from '../outbox/publish.ts';
import { ensureTopics } from '../outbox/topics.ts';
import type { AppContext } from '../app/context.ts';

/**
 * Runs every scheduled role of the cloud continuously in this process. A role whose lock another
 * process holds (a second twin on the same database) keeps trying at its poll interval.
 */
export async function startRoles(
  ctx: AppContext,
  signal: AbortSignal,
): Promise<{ done: Promise<unknown>; close: () => Promise<void>; healthChecks: Record<string, HealthCheck> }> {
  const listed = ctx.config.txmsg.topics.map((t) => topicForTarget(ctx.config, `tx:${t}`)!);
  const topics = await ensureTopics(ctx.config, listed, { log: ctx.log });
  if (topics.created.length) ctx.log.info('topics created', { topics: topics.created });
  for (const w of topics.warnings) ctx.log.warn(w);
  await warnMissingTopics(ctx);
  const publishers = buildPublishers(ctx.config, { log: ctx.log, clock: ctx.clock });
  const specs: RoleSpec[] = [pollerRole(ctx), pumpRole(ctx), dispatcherRole(ctx, publishers), sweepRole(ctx)];
  const done = Promise.all(specs.map((spec) => runForever(ctx, spec, signal)));
  return { done, close: () => closePublishers(publishers), healthChecks: kafkaHealth(ctx) };
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

/** Outbox targets whose topic the cluster lacks would only be retried until DEAD: say so at start. */
async function warnMissingTopics(ctx: AppContext): Promise<void> {
  try {
    const missing = await missingTopics(ctx.config, ctx.db);
    if (missing.length)
      ctx.log.warn(`Kafka topics missing (create them, or their events go DEAD after their retries): ${describeMissing(missing)}`, {
        missingTopics: missing,
      });
  } catch (err) {
    ctx.log.warn('could not check the Kafka topics at start', { error: String(err) });
  }
}
