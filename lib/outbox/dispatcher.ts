import { PROCESS_DISPATCHER_ID } from './dispatcherId.ts';
import { dispatchLogTargets } from './logDispatch.ts';
import { noopMetrics } from './metrics.ts';
import { round, sum, type DispatchReport } from './report.ts';
import { logRound } from './roundLog.ts';
import type { DispatchContext, DispatchOptions, Publisher } from './types.ts';

// Importers reach the relay through this file (lib/jobs/dispatcherRole.ts, the tests).
export { topicForTarget } from './publish.ts';
export type { DispatchReport } from './report.ts';
export type { DispatchContext, DispatchOptions, SentEvent } from './types.ts';

/*
 * The outbox relay. A round reads each target as a commit-ordered log under a lease on its cursor
 * (lib/outbox/logDispatch.ts, with the ordering argument; docs/outbox.md "The dispatcher on the
 * log"); this file sums the targets' reports into the round's and logs it.
 */

/** One delivery round over every target with something to do. */
export async function dispatchOnce(
  ctx: DispatchContext,
  publishers: Publisher[] | ((target: string) => Publisher[]),
  options: DispatchOptions = {},
): Promise<DispatchReport> {
  const started = performance.now();
  const now = ctx.clock.now();
  const me = options.dispatcherId ?? PROCESS_DISPATCHER_ID;
  const metrics = options.metrics ?? noopMetrics;

  const { reports, discoverMs } = await dispatchLogTargets(ctx, publishers, now, me, options);

  const report: DispatchReport = {
    targets: reports,
    sent: sum(reports, 'sent'),
    retried: sum(reports, 'retried'),
    dead: sum(reports, 'dead'),
    more: reports.some((r) => !!r.full),
    discoverMs: round(discoverMs),
    totalMs: round(performance.now() - started),
  };
  logRound(ctx.log, report);
  metrics.recordRound(report);
  return report;
}
