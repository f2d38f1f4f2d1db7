import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Clock } from '../shared/clock.ts';
import { systemClock } from '../shared/clock.ts';
import type { DispatchReport } from './dispatcher.ts';

/**
 * Where the dispatcher's numbers go. Injected, so tests record them instead of printing EMF.
 */
export interface OutboxMetrics {
  /** Called once per delivery round with its report. */
  recordRound(report: DispatchReport): void;
  /** Emits what is buffered (call at the end of an invocation / on shutdown). */
  flush(): void;
}

export const noopMetrics: OutboxMetrics = { recordRound() {}, flush() {} };

export interface EmfMetricsOptions {
  namespace?: string;
  serviceName?: string;
  /** Emit at most this often; rounds in between are summed (counters) or overwritten (gauges). */
  intervalMs?: number;
  clock?: Clock;
}

/**
 * CloudWatch EMF through Powertools (namespace `msgx`): counters EventsSent, EventsRetried and
 * DeadCount{kind=event} (events that went DEAD in the interval; the dead-letter alarm watches it),
 * and the gauge OldestPendingEventSeconds{target} (0 once a target has drained).
 */
export function createEmfMetrics(options: EmfMetricsOptions = {}): OutboxMetrics {
  const namespace = options.namespace ?? 'msgx';
  // service=msgx: the dimension the alarms select (per-target gauges add a target dimension).
  const serviceName = options.serviceName ?? 'msgx';
  const intervalMs = options.intervalMs ?? 60_000;
  const clock = options.clock ?? systemClock;
  let sent = 0;
  let retried = 0;
  let dead = 0;
  let dirty = false;
  let lastEmit = 0;
  const oldest = new Map<string, number>();

  const emit = () => {
    if (!dirty) return;
    const m = new Metrics({ namespace, serviceName });
    m.addMetric('EventsSent', MetricUnit.Count, sent);
    m.addMetric('EventsRetried', MetricUnit.Count, retried);
    m.publishStoredMetrics();
    const d = new Metrics({ namespace, serviceName });
    d.addDimension('kind', 'event');
    d.addMetric('DeadCount', MetricUnit.Count, dead);
    d.publishStoredMetrics();
    for (const [target, seconds] of oldest) {
      const g = new Metrics({ namespace, serviceName });
      g.addDimension('target', target);
      g.addMetric('OldestPendingEventSeconds', MetricUnit.Seconds, seconds);
      g.publishStoredMetrics();
    }
    sent = retried = dead = 0;
    dirty = false;
    lastEmit = clock.now().getTime();
  };

  return {
    recordRound(report) {
      sent += report.sent;
      retried += report.retried;
      dead += report.dead;
      for (const target of oldest.keys()) oldest.set(target, 0);
      for (const t of report.targets) oldest.set(t.target, t.oldestPendingSeconds);
      dirty = true;
      if (clock.now().getTime() - lastEmit >= intervalMs) emit();
    },
    flush: emit,
  };
}
