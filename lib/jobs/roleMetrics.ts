import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { RoleMetricsSink } from '../app/role.ts';
import type { WorkerSummary } from './worker.ts';
import { METRIC_NAMESPACE, METRIC_SERVICE } from '../constants.ts';

export type { RoleMetricsSink } from '../app/role.ts';

/**
 * RoleMetricsSink in CloudWatch: what every scheduled invocation reports about its role (EMF, namespace msgx, dimensions
 * {service: msgx, role}), so the alarms can watch the watchers (infra-cdk monitoring stack):
 * - `Heartbeat` 1 when the invocation held the role's lock and finished its loop; a role whose
 *   heartbeats stop (schedule off, crash, lock held by a dead worker) alarms on missing data;
 * - `RoleLockTaken` 1 when the lock was taken by someone else, 0 when this invocation got it; its
 *   minimum over a minute is 1 only when no invocation of that minute got the lock.
 */
export const emfRoleMetrics: RoleMetricsSink = (role, values) => {
  const m = new Metrics({ namespace: METRIC_NAMESPACE, serviceName: METRIC_SERVICE });
  m.addDimension('role', role);
  for (const [name, value] of Object.entries(values)) m.addMetric(name, MetricUnit.Count, value);
  m.publishStoredMetrics();
};

export function roleMetricValues(s: WorkerSummary): { Heartbeat: number; RoleLockTaken: number } {
  return { Heartbeat: s.acquired ? 1 : 0, RoleLockTaken: s.acquired ? 0 : 1 };
}
