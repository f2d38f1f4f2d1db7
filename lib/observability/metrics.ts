import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Queryable } from '../db/db.ts';
import { METRIC_NAMESPACE, METRIC_SERVICE, METRICS } from '../constants.ts';

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

export async function readGauges(q: Queryable, now: Date, windowMs: number): Promise<PipelineGauges> {
  const since = new Date(now.getTime() - windowMs);
  const r = await q.query<{
    head_age: number | null;
    backlog: number;
    dead_proc: number;
    dead_event: number;
    dead_tx: number;
    oldest_event: number | null;
    backfill_failures: number;
    holes: string | null;
    late: number;
  }>(
    `SELECT
       (SELECT extract(epoch FROM $1 - min(enqueued_at)) FROM proc_state
          WHERE msg_id = (SELECT min(msg_id) FROM proc_state WHERE status IN ('PENDING', 'FAILED')))::float8 AS head_age,
       (SELECT count(*) FROM proc_state WHERE status IN ('PENDING', 'FAILED'))::int AS backlog,
       (SELECT count(*) FROM proc_state WHERE status = 'DEAD' AND finished_at > $2)::int AS dead_proc,
       (SELECT count(*) FROM msg_event WHERE status = 'DEAD' AND dead_at > $2)::int AS dead_event,
       (SELECT count(*) FROM tx_message WHERE status = 'DEAD' AND updated_at > $2)::int AS dead_tx,
       (SELECT extract(epoch FROM $1 - min(created_at)) FROM msg_event WHERE status IN ('PENDING', 'DELIVERING') AND sent_at IS NULL AND dead_at IS NULL)::float8 AS oldest_event,
       (SELECT count(*) FROM backfill_todo WHERE attempts > 0)::int AS backfill_failures,
       (SELECT value->>'holes' FROM msgx_state WHERE key = 'mailbox.counters') AS holes,
       (SELECT count(*) FROM mailbox_late)::int AS late`,
    [now, since],
  );
  const row = r.rows[0]!;
  return {
    headAgeSeconds: Math.max(0, row.head_age ?? 0),
    backlog: row.backlog,
    deadInWindow: { proc: row.dead_proc, event: row.dead_event, txmsg: row.dead_tx },
    oldestPendingEventSeconds: Math.max(0, row.oldest_event ?? 0),
    backfillFailures: row.backfill_failures,
    mailboxHoles: Number(row.holes ?? 0),
    lateRows: row.late,
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
