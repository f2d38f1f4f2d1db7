import type { Context } from 'aws-lambda';
import { loadConfig } from '../config/config.ts';
import { resolveSecretEnv } from '../config/secrets.ts';
import type { AppContext } from '../shared/context.ts';
import { buildContext } from '../shared/buildContext.ts';
import type { RoleSpec } from './roles.ts';
import { runWorker, type WorkerSummary } from './worker.ts';

/** Leave this much of the invocation for releasing the lock and returning. */
export const BUDGET_MARGIN_MS = 10_000;

let contextPromise: Promise<AppContext> | undefined;

/** One context per cold start: secrets resolved, config validated, clients created once. */
export function lambdaContext(): Promise<AppContext> {
  contextPromise ??= (async () => {
    const env = await resolveSecretEnv(process.env);
    const config = loadConfig({ ...env, MSGX_RUNTIME: 'lambda' });
    // Statements stay well below the function timeout so a frozen one never outlives its worker.
    return buildContext(config, { statementTimeoutMs: 30_000 });
  })();
  contextPromise.catch(() => (contextPromise = undefined));
  return contextPromise;
}

/**
 * A scheduled role as a Lambda handler: EventBridge fires at most once a minute, so the invocation
 * works in a loop (woken by NOTIFY) until its budget — the remaining time less a margin — is spent.
 */
export function scheduledHandler(makeRole: (ctx: AppContext) => RoleSpec) {
  let role: RoleSpec | undefined;
  return async (_event: unknown, lambda: Pick<Context, 'getRemainingTimeInMillis'>): Promise<WorkerSummary> => {
    const ctx = await lambdaContext();
    role ??= makeRole(ctx);
    const budgetMs = Math.max(0, lambda.getRemainingTimeInMillis() - BUDGET_MARGIN_MS);
    const spec = role;
    // Metrics belong to the invocation that measured them: emitted at its start (gauges even
    // when another instance holds the role's lock) and before it returns, never buffered across
    // invocations of a warm environment that may be recycled at any moment.
    const flush = async () => {
      try {
        await spec.flush?.();
      } catch (err) {
        ctx.log.warn('metrics flush failed', { role: spec.role, error: String(err) });
      }
    };
    await flush();
    let summary: WorkerSummary;
    try {
      summary = await runWorker(ctx, { ...spec, budgetMs });
    } finally {
      await flush();
    }
    ctx.log.info('role invocation finished', { ...summary });
    return summary;
  };
}
