import { emfRoleMetrics } from '../jobs/roleMetrics.ts';
import type { MetricsSink } from './role.ts';
import { emitGauges } from '../observability/metrics.ts';
import { createEmfMetrics, noopMetrics } from '../outbox/metrics.ts';

/**
 * The two metrics sinks a role can be given (lib/app/role.ts `RolePorts`), so every role is built
 * the same way wherever it runs. In Lambda, CloudWatch EMF on stdout (namespace and names in
 * lib/constants.ts): what the alarms watch.
 */
export const emfMetricsSink: MetricsSink = {
  roleRun: emfRoleMetrics,
  outbox: () => createEmfMetrics(),
  pipelineGauges: (g) => emitGauges(g),
};

/** The twin and the fault child: nobody reads EMF there, so nothing is measured or printed. */
export const localMetricsSink: MetricsSink = {
  roleRun: () => {},
  outbox: () => noopMetrics,
};
