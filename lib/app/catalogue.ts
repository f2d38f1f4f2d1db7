/*
 * The role catalogue: every scheduled role msgx runs, and what the runtime and the cloud need to
 * know about it. One entry per role; adding a role is its step in its domain, an entry here and
 * its one-line Lambda entry functions/<role>.ts (docs/architecture.md, "Adding a scheduled role").
 *
 * Dependency-free on purpose (the linter enforces it): infra-cdk reads it for the functions, their
 * schedules, grants and alarms without loading any runtime code. The runtime turns an entry into a
 * running role in lib/app/role.ts `catalogueRole`: the twin and the fault child load `step` by path
 * (lib/app/localRoles.ts), a Lambda bundle imports it statically (functions/<role>.ts, which calls
 * lib/jobs/coldStart.ts `roleHandler`).
 */

/** What a role's function is granted besides msgx's PostgreSQL (infra-cdk/stacks/service-stack.ts). */
export type RoleResource = 'mailbox' | 'kafka' | 'signingSecret';

/**
 * One scheduled role. Metrics need no field: every role reports Heartbeat and RoleLockTaken after
 * each run (the Heartbeat and LockTaken alarms, infra-cdk/stacks/monitoring-stack.ts), and what a
 * role measures besides goes through the sink its factory is given (`ports.metrics`: EMF in
 * Lambda, nowhere in the twin).
 */
export interface RoleEntry {
  /**
   * The role's factory, `(ctx, ports) => RoleSpec` (lib/app/role.ts `RoleFactory`): its module,
   * relative to the repository root, and the name it is exported as. A path, not an import, so
   * that this file stays free of runtime code; test/unit/catalogue.test.ts loads every one.
   */
  step: { module: string; export: string };
  /** What the function does (its Lambda description). */
  description: string;
  /**
   * EventBridge Scheduler starts the function this often; each invocation loops until its budget
   * (timeout less lib/jobs/coldStart.ts BUDGET_MARGIN_MS) is spent. The twin runs it continuously.
   */
  everyMinutes: number;
  /** Lambda defaults; a stage overrides them in cdk.json (`stages.<name>.functions`). */
  memoryMb: number;
  timeoutSeconds: number;
  /**
   * One instance at a time, under the role's advisory lock (lib/jobs/roleLock.ts), with the
   * RoleLockTaken alarm. `false` only for a role that is safe to run twice at once.
   */
  lock: boolean;
  uses: readonly RoleResource[];
}

/**
 * Scheduled roles, in the order the twin starts them and infra lists them. Timeouts: the loop runs
 * for timeout − 20 s (BUDGET_MARGIN_MS, above the 15 s statement timeout), so 65 s ends each loop
 * at ~45 s, releasing the lock before the next tick.
 */
export const ROLE_CATALOGUE = {
  poller: {
    step: { module: 'lib/jobs/roles.ts', export: 'pollerRole' },
    description: 'msgx poller: mailbox -> proc_state (scheduled)',
    everyMinutes: 1,
    memoryMb: 256,
    timeoutSeconds: 65,
    lock: true,
    uses: ['mailbox'],
  },
  pump: {
    step: { module: 'lib/jobs/roles.ts', export: 'pumpRole' },
    description: 'msgx pump: FIFO head processing (scheduled, kicked by ingress)',
    everyMinutes: 1,
    memoryMb: 512,
    timeoutSeconds: 65,
    lock: true,
    uses: ['mailbox'],
  },
  dispatcher: {
    step: { module: 'lib/jobs/dispatcherRole.ts', export: 'scheduledDispatcherRole' },
    description: 'msgx dispatcher: outbox -> MSK and webhooks (scheduled)',
    everyMinutes: 1,
    memoryMb: 512,
    timeoutSeconds: 65,
    lock: true,
    uses: ['kafka', 'signingSecret'],
  },
  sweep: {
    step: { module: 'lib/jobs/roles.ts', export: 'scheduledSweepRole' },
    description: 'msgx sweep: backfill, tx check-back, retention, leases (scheduled)',
    everyMinutes: 1,
    memoryMb: 256,
    timeoutSeconds: 65,
    lock: true,
    uses: ['mailbox', 'signingSecret'],
  },
} as const satisfies Record<string, RoleEntry>;

export type ScheduledRole = keyof typeof ROLE_CATALOGUE;
/** Roles run on a schedule under a lock (one Lambda each in the cloud, all in the twin). */
export const SCHEDULED_ROLES = Object.keys(ROLE_CATALOGUE) as ScheduledRole[];
/** Every function the cloud deploys: the scheduled roles plus the HTTP entry and the migrator. */
export const FUNCTION_ROLES = ['ingress', ...SCHEDULED_ROLES, 'migrate'] as const;
export type FunctionRole = 'ingress' | ScheduledRole | 'migrate';

export function isScheduledRole(name: string): name is ScheduledRole {
  return Object.hasOwn(ROLE_CATALOGUE, name);
}
