import type { HealthCheck } from '../http/health.ts';
import { pollerRole, pumpRole, type RoleSpec, sweepRole } from '../jobs/roles.ts';
import { runWorker } from '../jobs/worker.ts';
import type { AppContext } from '../shared/context.ts';

/**
 * Runs every scheduled role of the cloud continuously in this process. A role whose lock another
 * process holds (a second twin on the same database) keeps trying at its poll interval.
 */
export async function startRoles(
  ctx: AppContext,
  signal: AbortSignal,
): Promise<{ done: Promise<unknown>; close: () => Promise<void>; healthChecks: Record<string, HealthCheck> }> {
  const specs: RoleSpec[] = [pollerRole(ctx), pumpRole(ctx), sweepRole(ctx)];
  const done = Promise.all(specs.map((spec) => runForever(ctx, spec, signal)));
  return { done, close: async () => {}, healthChecks: {} };
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
