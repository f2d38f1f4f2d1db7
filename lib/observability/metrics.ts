import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Queryable } from '../db/db.ts';
import { METRIC_NAMESPACE, METRIC_SERVICE, METRICS } from '../constants.ts';
import { eventGauges } from '../outbox/queries.ts';
import { failingBackfills } from '../pipeline/backfill.ts';
import { holeCounters } from '../pipeline/frontier.ts';
import { queueGauges } from '../pipeline/procStats.ts';
import { txDeadSince } from '../txmsg/stats.ts';

/**
 * The gauges the CloudWatch alarms watch (infra-cdk monitoring stack), as EMF in namespace msgx
 * with the dimension service=msgx (plus kind on DeadCount). Emitted by the sweep at the start and
 * end of every invocation and once a minute between, whether or not anything else runs, so a stuck
 * pipeline is seen even when no worker is busy. OldestPendingEventSeconds comes from the
 * dispatcher (lib/outbox/metrics.ts), the role that knows it, in every invocation.
 */
export interface PipelineGauges {
  headAgeSeconds: number;
  backlog: number;
  /** Messages, events and transactional messages that went DEAD in the last window. */
  deadInWindow: { proc: number; event: number; txmsg: number };
  oldestPendingEventSeconds: number;
  /**
   * Mailbox back-fills that failed at least once and are still owed (backfill_todo rows with
   * attempts > 0): above zero for a while means the mailbox refuses our writes (docs/deploy.md "Alarms").
   */
  backfillFailures: number;
  /** docs/ordering.md: mailbox IDs ever given up as holes, and rows processed late. */
  mailboxHoles: number;
  lateRows: number;
}

/**
 * Read through the owners' query functions (each table's SQL is in the module that owns it,
 * docs/architecture.md "Who owns which table"): the pipeline's queue, back-fills and holes, the
 * outbox's events, txmsg's messages.
 */
export async function readGauges(q: Queryable, now: Date, windowMs: number): Promise<PipelineGauges> {
  const since = new Date(now.getTime() - windowMs);
  const [queue, events, deadTx, backfillFailures, holes] = await Promise.all([
    queueGauges(q, now, since),
    eventGauges(q, now, since),
    txDeadSince(q, since),
    failingBackfills(q),
    holeCounters(q),
  ]);
  return {
    headAgeSeconds: queue.headAgeSeconds,
    backlog: queue.backlog,
    deadInWindow: { proc: queue.deadSince, event: events.deadSince, txmsg: deadTx },
    oldestPendingEventSeconds: events.oldestOpenSeconds,
    backfillFailures,
    mailboxHoles: holes.holes,
    lateRows: holes.lateRows,
  };
}

export function emitGauges(g: PipelineGauges, namespace = METRIC_NAMESPACE): void {
  const m = new Metrics({ namespace, serviceName: METRIC_SERVICE });
  m.addMetric(METRICS.headAge, MetricUnit.Seconds, g.headAgeSeconds);
  m.addMetric(METRICS.backlog, MetricUnit.Count, g.backlog);
  m.addMetric(METRICS.backfillFailures, MetricUnit.Count, g.backfillFailures);
  m.addMetric(METRICS.mailboxHoles, MetricUnit.Count, g.mailboxHoles);
  m.addMetric(METRICS.lateRows, MetricUnit.Count, g.lateRows);
  m.publishStoredMetrics();
  for (const [kind, n] of Object.entries(g.deadInWindow)) {
    const d = new Metrics({ namespace, serviceName: METRIC_SERVICE });
    d.addDimension('kind', kind);
    d.addMetric(METRICS.deadCount, MetricUnit.Count, n);
    d.publishStoredMetrics();
  }
}
