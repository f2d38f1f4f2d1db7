/*
 * Names that lib/ and infra-cdk/ must agree on: role names, the CloudWatch metric contract and
 * the public send path. Dependency-free on purpose (the linter enforces it): the CDK app imports
 * this file and nothing else from lib/, so a rename is one edit here and tsc finds every user.
 */

/** Roles run on a schedule under a lock (lib/jobs/roles.ts; one Lambda each in the cloud). */
export const SCHEDULED_ROLES = ['poller', 'pump', 'dispatcher', 'sweep'] as const;
export type ScheduledRole = (typeof SCHEDULED_ROLES)[number];
/** Every function the cloud deploys: the scheduled roles plus the HTTP entry and the migrator. */
export const FUNCTION_ROLES = ['ingress', ...SCHEDULED_ROLES, 'migrate'] as const;
export type FunctionRole = (typeof FUNCTION_ROLES)[number];

/** CloudWatch EMF namespace of every custom metric, and the Powertools `service` dimension. */
export const METRIC_NAMESPACE = 'msgx';
export const METRIC_SERVICE = 'msgx';

/** Custom metric names (docs/deploy.md lists what each means and which alarm watches it). */
export const METRICS = {
  headAge: 'HeadAgeSeconds',
  backlog: 'Backlog',
  backfillFailures: 'BackfillFailures',
  mailboxHoles: 'MailboxHoles',
  lateRows: 'LateRows',
  deadCount: 'DeadCount',
  eventsSent: 'EventsSent',
  eventsRetried: 'EventsRetried',
  oldestPendingEvent: 'OldestPendingEventSeconds',
  outboxBacklog: 'OutboxBacklog',
  stalledTargets: 'StalledTargets',
  heartbeat: 'Heartbeat',
  roleLockTaken: 'RoleLockTaken',
} as const;

/** The one path upstream systems post CMINMSGS messages to (HTTP route, API Gateway, twin). */
export const SEND_PATH = '/cminmsgs/send';
