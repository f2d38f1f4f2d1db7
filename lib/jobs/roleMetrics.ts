import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { RoleMetricsSink, RoleRunValues } from '../app/role.ts';
import type { WorkerSummary } from './worker.ts';
import { METRIC_NAMESPACE, METRIC_SERVICE } from '../constants.ts';

export type { RoleMetricsSink } from '../app/role.ts';

/**
 * RoleMetricsSink in CloudWatch: what every scheduled invocation reports about its role (EMF, namespace msgx, dimensions
 * {service: msgx, role}), so the alarms can watch the watchers (infra-cdk monitoring stack):
 * - `Heartbeat` 1 when the invocation held the role's lock, finished its loop and did its work in
 *   at least one step; a role whose heartbeats stop (function failing, lock held by a dead worker,
 *   or — the pump only — the pipeline paused for the whole run) alarms on missing data;
 * - `RoleLockTaken` 1 when the lock was taken by someone else, 0 when this invocation got it; its
 *   minimum over a minute is 1 only when no invocation of that minute got the lock;
 * - `Paused` 1 when a step found the pipeline paused (only the pump's steps can), so a pump that
 *   is alive but paused says so instead of either beating or looking dead;
 * - `Disabled` 1 for an invocation of a role switched off (MSGX_DISABLED_ROLES): it did nothing.
 */
export const emfRoleMetrics: RoleMetricsSink = (role, values) => {
  const m = new Metrics({ namespace: METRIC_NAMESPACE, serviceName: METRIC_SERVICE });
  m.addDimension('role', role);
  for (const [name, value] of Object.entries(values)) m.addMetric(name, MetricUnit.Count, value);
  m.publishStoredMetrics();
};

export function roleMetricValues(s: WorkerSummary): RoleRunValues {
  // Switched off on purpose: neither alive nor blocked by another instance.
  if (s.stoppedBy === 'disabled') return { Heartbeat: 0, RoleLockTaken: 0, Disabled: 1 };
  // A run whose every step was paused did no work: a heartbeat would pretend it did.
  const worked = s.acquired && s.pausedSteps < s.steps;
  return {
    Heartbeat: worked ? 1 : 0,
    RoleLockTaken: s.acquired ? 0 : 1,
    ...(s.pausedSteps > 0 ? { Paused: 1 } : {}),
  };
}
