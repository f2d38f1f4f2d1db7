/*
 * Names that lib/ and infra-cdk/ must agree on: the CloudWatch metric contract and the public send
 * path (the roles are in lib/app/catalogue.ts). Dependency-free on purpose (the linter enforces
 * it): the CDK app imports this file and the catalogue and nothing else from lib/, so a rename is
 * one edit here and tsc finds every user.
 */

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
  txDeadLetter: 'TxMessageDead',
  eventsSent: 'EventsSent',
  eventsRetried: 'EventsRetried',
  oldestPendingEvent: 'OldestPendingEventSeconds',
  outboxBacklog: 'OutboxBacklog',
  stalledTargets: 'StalledTargets',
  heartbeat: 'Heartbeat',
  roleLockTaken: 'RoleLockTaken',
  paused: 'Paused',
} as const;

/**
 * An operator principal (MSGX_OPERATOR_PRINCIPALS, cdk.json `operatorPrincipals`): an IAM role ARN,
 * `arn:<partition>:iam::<account>:role/<path/><name>`; groups: partition, account, role name.
 */
export const OPERATOR_ROLE_ARN = /^arn:(aws|aws-cn|aws-us-gov|aws-iso|aws-iso-b):iam::(\d{12}):role\/(?:[\w+=,.@-]+\/)*([\w+=,.@-]{1,64})$/;

/** The one path upstream systems post CMINMSGS messages to (HTTP route, API Gateway, twin). */
export const SEND_PATH = '/cminmsgs/send';

/** Largest message body accepted, in UTF-8 bytes: the XML gate's limit and MSGX_MAX_BODY_BYTES's default. */
export const MAX_MESSAGE_BYTES = 1024 * 1024;

/*
 * Exactly once into Kafka (docs/outbox.md "Exactly once into Kafka"): the names the dispatcher
 * gives Kafka per deployment, here so the CDK app grants the very prefix the code uses
 * (infra-cdk/constructs/msgx-function.ts bindKafka).
 */

/** Every transactional.id and cursor group of a stage starts with this; the stage has no dot, so no stage's prefix covers another's. */
export const stagePrefix = (stage: string): string => `msgx.${stage}.`;

/** One per stage and target: a replacement dispatcher's producer fences the older one of the same id. */
export const transactionalId = (stage: string, target: string): string => `${stagePrefix(stage)}${target}`;

/** What every cursor group of a stage starts with (the grant's pattern). */
export const cursorGroupPrefix = (stage: string): string => `${stagePrefix(stage)}cursor-`;

/** The throwaway consumer group that reads the offsets topic at start; unique per process start. */
export const cursorGroupId = (stage: string): string => `${cursorGroupPrefix(stage)}${process.pid}-${Date.now()}`;

/*
 * PostgreSQL connections per process, here so the CDK app sizes the stage's connection budget
 * (infra-cdk/config.ts connectionBudget) with the numbers the code opens.
 */
export const POOL_SIZE = {
  /** A Lambda container runs one invocation at a time (a few for the concurrent queries of one request). */
  lambda: 3,
  /** The twin runs every role and the HTTP server in one process. */
  twin: 10,
  /** The deploy-time migrator runs one statement at a time: two leave room for the pool to replace one. */
  migrate: 2,
  /** The CLI on the database directly (`MSGX_PG_URL`): an operator's command at a time. */
  operator: 2,
} as const;
