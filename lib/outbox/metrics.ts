import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Queryable } from '../db/db.ts';
import type { DispatchReport } from './report.ts';
import { METRIC_NAMESPACE, METRIC_SERVICE, METRICS } from '../constants.ts';

/**
 * Where the dispatcher's numbers go. Injected, so tests record them instead of printing EMF.
 */
export interface OutboxMetrics {
  /** Called once per delivery round with its report (counters are summed until the next flush). */
  recordRound(report: DispatchReport): void;
  /** The backlog as the database sees it now (gauges; the last one recorded is flushed). */
  recordGauges(g: OutboxGauges): void;
  /**
   * Emits what was measured since the last flush. The dispatcher's Lambda handler calls it at the
   * start and before the end of every invocation, so counts arrive in the minute they
   * happened and an idle or stuck dispatcher still reports its gauges.
   */
  flush(): void;
}

export const noopMetrics: OutboxMetrics = { recordRound() {}, recordGauges() {}, flush() {} };

/** What only the relay knows well: how old its oldest open event is, how many wait, what is stalled. */
export interface OutboxGauges {
  /** Age of the oldest PENDING/DELIVERING event over all targets (0 when none). */
  oldestPendingEventSeconds: number;
  /** Open (PENDING/DELIVERING) events over all targets. */
  openEvents: number;
  /** Targets whose head is held by an outage of the destination (stalled_since set). */
  stalledTargets: number;
  /** Per target with open events: the age of its oldest open event. */
  byTarget: { target: string; oldestPendingEventSeconds: number }[];
}

export async function readOutboxGauges(q: Queryable, now: Date): Promise<OutboxGauges> {
  const r = await q.query<{ target: string; oldest: number; open: number; stalled: boolean }>(
    `SELECT target, extract(epoch FROM $1 - min(created_at))::float8 AS oldest, count(*)::int AS open,
            bool_or(stalled_since IS NOT NULL) AS stalled
     FROM msgx_outbox_open($1) GROUP BY target ORDER BY target`,
    [now],
  );
  const byTarget = r.rows.map((x) => ({ target: x.target, oldestPendingEventSeconds: Math.max(0, Math.round(x.oldest)) }));
  return {
    oldestPendingEventSeconds: Math.max(0, ...byTarget.map((t) => t.oldestPendingEventSeconds)),
    openEvents: r.rows.reduce((n, x) => n + x.open, 0),
    stalledTargets: r.rows.filter((x) => x.stalled).length,
    byTarget,
  };
}

export interface EmfMetricsOptions {
  namespace?: string;
  serviceName?: string;
}

/**
 * CloudWatch EMF through Powertools (namespace `msgx`, dimension service=msgx, which the
 * monitoring stack's alarms select): counters EventsSent, EventsRetried and DeadCount{kind=event}
 * (events that went DEAD since the last flush), gauges OldestPendingEventSeconds (the alarm's
 * metric), OutboxBacklog and StalledTargets, and OldestPendingEventSeconds{target} per target
 * (0 once a target has drained). Every flush emits all of them, zeros included, so a quiet
 * minute is a zero datapoint and only a dead dispatcher leaves a gap.
 */
export function createEmfMetrics(options: EmfMetricsOptions = {}): OutboxMetrics {
  const namespace = options.namespace ?? METRIC_NAMESPACE;
  const serviceName = options.serviceName ?? METRIC_SERVICE;
  let sent = 0;
  let retried = 0;
  let dead = 0;
  let gauges: OutboxGauges | null = null;
  /** Targets seen before: they get a 0 once drained, so their per-target gauge comes down. */
  const targets = new Set<string>();
  const metrics = () => new Metrics({ namespace, serviceName });

  return {
    recordRound(report) {
      sent += report.sent;
      retried += report.retried;
      dead += report.dead;
    },
    recordGauges(g) {
      gauges = g;
    },
    flush() {
      const m = metrics();
      m.addMetric(METRICS.eventsSent, MetricUnit.Count, sent);
      m.addMetric(METRICS.eventsRetried, MetricUnit.Count, retried);
      if (gauges) {
        m.addMetric(METRICS.oldestPendingEvent, MetricUnit.Seconds, gauges.oldestPendingEventSeconds);
        m.addMetric(METRICS.outboxBacklog, MetricUnit.Count, gauges.openEvents);
        m.addMetric(METRICS.stalledTargets, MetricUnit.Count, gauges.stalledTargets);
      }
      m.publishStoredMetrics();
      const d = metrics();
      d.addDimension('kind', 'event');
      d.addMetric(METRICS.deadCount, MetricUnit.Count, dead);
      d.publishStoredMetrics();
      if (gauges) {
        const now = new Map(gauges.byTarget.map((t) => [t.target, t.oldestPendingEventSeconds]));
        for (const t of now.keys()) targets.add(t);
        for (const target of targets) {
          const g = metrics();
          g.addDimension('target', target);
          g.addMetric(METRICS.oldestPendingEvent, MetricUnit.Seconds, now.get(target) ?? 0);
          g.publishStoredMetrics();
          if (!now.has(target)) targets.delete(target);
        }
      }
      sent = retried = dead = 0;
      gauges = null;
    },
  };
}
