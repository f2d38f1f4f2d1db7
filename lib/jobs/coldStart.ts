import type { Context } from 'aws-lambda';
import { type Config, loadConfig } from '../config/config.ts';
import { lambdaSecretReader, type ReadSecret, resolveSecretEnv, type UrlSources, urlSources } from '../config/secrets.ts';
import type { AppContext } from '../app/context.ts';
import { buildContext } from '../app/buildContext.ts';
import type { ScheduledRole } from '../app/catalogue.ts';
import { emfMetricsSink } from '../app/metrics.ts';
import { catalogueRole, type MetricsSink, type RoleFactory, type RoleMetricsSink, type RoleSpec } from '../app/role.ts';
import { roleMetricValues } from './roleMetrics.ts';
import { runWorker, type WorkerSummary } from './worker.ts';
import { asyncInvoker } from './kick.ts';
import { HANDOVER_EVENT, HANDOVER_LEAD_MS, isHandover } from './handover.ts';

/**
 * No statement runs longer than this in a function: the server cancels it. Kept below the stop
 * margin, so a step abandoned when the budget runs out has ended before Lambda's deadline.
 */
export const LAMBDA_STATEMENT_TIMEOUT_MS = 15_000;
/**
 * Leave this much of the invocation for the step in flight to end (statement timeout), releasing
 * the lock and returning. 65 s functions loop ~45 s and release the lock before the next tick.
 */
export const BUDGET_MARGIN_MS = 20_000;
/**
 * Kept back from the margin for releasing the lock and returning: a step still running this close
 * to Lambda's deadline is abandoned (the run ends cleanly) rather than killed with the lock held.
 */
export const RELEASE_RESERVE_MS = 3_000;

let contextPromise: Promise<AppContext> | undefined;
let readSecret: ReadSecret | undefined;
let metrics: MetricsSink = emfMetricsSink;

/**
 * Replace the Secrets Manager port (a stand-in in tests) and the metrics sink, or only its role
 * metrics. Call before the first invocation: the context and the roles are built once per cold start.
 */
export function configureLambda(o: { readSecret?: ReadSecret; metrics?: MetricsSink; roleMetrics?: RoleMetricsSink }): void {
  if (o.readSecret) readSecret = o.readSecret;
  if (o.metrics) metrics = o.metrics;
  if (o.roleMetrics) metrics = { ...metrics, roleRun: o.roleMetrics };
}

/**
 * One context per cold start: secrets resolved (through the Parameters and Secrets extension when
 * the function has it), config validated, clients created once. The database URLs are re-read
 * from Secrets Manager itself (`fresh`, past the extension's cache) when a login is refused
 * (rotation), so a warm function follows a new password without a cold start.
 */
export function lambdaContext(): Promise<AppContext> {
  contextPromise ??= (async () => {
    const { config, credentials } = await lambdaConfig();
    return buildContext(config, { statementTimeoutMs: LAMBDA_STATEMENT_TIMEOUT_MS, credentials });
  })();
  contextPromise.catch(() => (contextPromise = undefined));
  return contextPromise;
}

/**
 * The function's configuration alone: secrets resolved (see lambdaContext), validated. What the
 * deploy-time migration starts from; it needs the database, not the context built over it.
 */
export async function lambdaConfig(): Promise<{ config: Config; credentials: UrlSources }> {
  const read = (readSecret ??= lambdaSecretReader(process.env));
  const env = await resolveSecretEnv(process.env, read);
  const config = loadConfig({ ...env, MSGX_RUNTIME: 'lambda' });
  return { config, credentials: urlSources(process.env, read, { fresh: true }) };
}

/**
 * A scheduled role as a Lambda handler: EventBridge fires at most once a minute, so the invocation
 * works in a loop (woken by NOTIFY) until its budget — the remaining time less a margin — is spent.
 * Each step gets the time left; a step still running when the margin is nearly spent too is
 * abandoned, not waited for, so the lock is always released before Lambda's deadline.
 */
export function scheduledHandler(makeRole: (ctx: AppContext) => RoleSpec) {
  let role: RoleSpec | undefined;
  const invoke = asyncInvoker();
  return async (
    event: unknown,
    lambda: Pick<Context, 'getRemainingTimeInMillis'> & Partial<Pick<Context, 'invokedFunctionArn'>>,
  ): Promise<WorkerSummary> => {
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
      // The successor is this very function as it was invoked (the live alias): started shortly
      // before the budget ends, it waits for this run's lock, so the role is never absent.
      const self = lambda.invokedFunctionArn;
      summary = await runWorker(ctx, {
        ...spec,
        budgetMs,
        stepGraceMs: BUDGET_MARGIN_MS - RELEASE_RESERVE_MS,
        ...(self && !spec.unlocked ? { handover: { leadMs: HANDOVER_LEAD_MS, start: () => invoke(self, HANDOVER_EVENT) } } : {}),
        // A successor waits out its predecessor's lead and its step's grace; a scheduled run does not wait.
        ...(isHandover(event) ? { lockWaitMs: HANDOVER_LEAD_MS + BUDGET_MARGIN_MS } : {}),
      });
    } finally {
      await flush();
    }
    metrics.roleRun(summary.role, roleMetricValues(summary));
    ctx.log.info('role invocation finished', { ...summary });
    return summary;
  };
}

/**
 * A catalogue role as a Lambda handler: what each scheduled role's functions/<role>.ts of
 * lib/app/catalogue.ts exports (`export const handler = roleHandler('pump', pumpRole)`). The role
 * is built once per cold start, with the EMF metrics sink; what it opens lives as long as the
 * environment.
 */
export function roleHandler(name: ScheduledRole, factory: RoleFactory) {
  return scheduledHandler((ctx) => catalogueRole(ctx, name, factory, { metrics, onClose: () => {} }));
}
