import { z } from 'zod';
import { ConfigError } from '../shared/errors.ts';
import { commaList, duration, durationList, flag, positiveInt, wireCode } from './parse.ts';
import { topicNameProblem } from '../shared/topicName.ts';
import { MAX_MESSAGE_BYTES, OPERATOR_ROLE_ARN } from '../constants.ts';
import { checkTargetOverrides, type DeliverySettings, targetOverridesField, type TargetOverride } from './delivery.ts';

/**
 * Every MSGX_* setting, parsed and validated once at start. Each entry names its variable so an
 * error message points at the exact setting. The README's configuration table mirrors this file.
 */
/**
 * The scheduled roles by name, for MSGX_DISABLED_ROLES. Config imports no domain, so the names are
 * written here; test/unit/config-roles.test.ts holds them to lib/app/catalogue.ts.
 */
export const SWITCHABLE_ROLES = ['poller', 'pump', 'dispatcher', 'sweep'] as const;
type SwitchableRole = (typeof SWITCHABLE_ROLES)[number];

const schema = z
  .object({
    MSGX_RUNTIME: z.enum(['twin', 'lambda']).optional(),
    MSGX_HTTP_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    MSGX_HTTP_HOST: z.string().min(1).default('127.0.0.1'),
    // Host names (or host:port) the twin answers to beyond loopback and MSGX_HTTP_HOST (DNS rebinding guard).
    MSGX_HTTP_ALLOWED_HOSTS: commaList().refine(
      (hosts) => hosts.every((h) => /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:\d{1,5})?$/.test(h)),
      'must be a comma list of host names, each optionally with :port (no scheme or path)',
    ),
    // Longest a client may take to send its headers and body; then 408 and the socket is closed.
    MSGX_HTTP_REQUEST_TIMEOUT: duration('30s'),
    MSGX_DATA_DIR: z.string().default('.msgx'),
    MSGX_PG_URL: z.string().url().optional(),
    MSGX_MAILBOX_URL: z
      .string()
      .regex(/^mysql:\/\//, 'must be a mysql:// URL')
      .optional(),
    /** PEM file: connect to the mailbox over TLS, verifying its certificate and host name. */
    MSGX_MAILBOX_SSL_CA: z.string().min(1).optional(),
    MSGX_KAFKA_BROKERS: commaList(),
    MSGX_KAFKA_SSL: flag(false),
    MSGX_KAFKA_IAM_REGION: z.string().optional(),
    MSGX_TIMEZONE: z
      .string()
      .default('Asia/Shanghai')
      .refine((tz) => {
        try {
          new Intl.DateTimeFormat('en', { timeZone: tz });
          return true;
        } catch {
          return false;
        }
      }, 'must be an IANA time zone such as Asia/Shanghai'),
    // Sent as `Authorization: Bearer …`: a space would split it and control characters cannot be
    // typed, so a token with either could never match.
    MSGX_ADMIN_TOKEN: z
      .string()
      .regex(
        /^[\x21-\x7e]{16,}$/,
        'must be at least 16 characters, all visible ASCII (letters, digits, punctuation; no spaces or control characters); use a long random string, e.g. `openssl rand -hex 32`',
      )
      .optional(),
    // The IAM roles that are operators in the cloud (admin routes); empty: nobody is (lib/http/operators.ts).
    MSGX_OPERATOR_PRINCIPALS: commaList().refine(
      (arns) => arns.every((a) => OPERATOR_ROLE_ARN.test(a)),
      'must be a comma list of IAM role ARNs (arn:aws:iam::<account>:role/<name>); operators call as such a role',
    ),
    MSGX_SHADOW: flag(false),
    MSGX_SIGNING_SECRET: z.string().min(1).optional(),
    MSGX_LOG_LEVEL: z.enum(['DEBUG', 'INFO', 'WARN', 'ERROR', 'SILENT']).default('INFO'),
    // Roles this deployment does not run (README "Roles and start"): the twin never starts them, the
    // cloud leaves their schedules disabled, and a function of one that is invoked anyway exits at once.
    MSGX_DISABLED_ROLES: commaList().refine(
      (roles) => roles.every((r) => (SWITCHABLE_ROLES as readonly string[]).includes(r)),
      `must be a comma list of roles to switch off, each one of ${SWITCHABLE_ROLES.join(', ')}`,
    ),
    // "No auto-start", as the system msgx replaces had it: every start (the twin's, a deploy's migration) pauses head processing
    // until an operator resumes it.
    MSGX_START_PAUSED: flag(false),

    // Inbox pipeline (docs/ordering.md "What the settings cost")
    MSGX_POLL_INTERVAL_MS: positiveInt(1000),
    MSGX_CLAIM_BATCH: positiveInt(50),
    // docs/ordering.md: how long a skipped mailbox ID is waited for, and re-checked once given up.
    MSGX_GAP_GRACE: duration('3s', { zero: true }), // 0s: never wait, every gap is a hole at once
    MSGX_HOLE_RECHECK: duration('10m', { zero: true }), // 0s: only the sweep's re-scan finds late rows
    MSGX_GROUP_COMMIT: z.coerce.number().int().min(1).max(500).default(50),
    MSGX_MAX_ATTEMPTS: positiveInt(5),
    MSGX_BACKOFF_INITIAL: duration('1s'),
    MSGX_BACKOFF_MAX: duration('60s'),
    MSGX_HEAD_DEADLINE: duration('10m'),
    MSGX_BACKFILL_INITIAL: duration('30s'),
    MSGX_BACKFILL_MAX: duration('15m'),
    MSGX_MAX_BODY_BYTES: positiveInt(MAX_MESSAGE_BYTES),
    // MSGX_IDENTITY_DAY_BOUNDARY (docs/glossary.md "day boundary"): changes duplicate semantics, so it is fixed
    // once messages exist (lib/pipeline/identityMode.ts; change it with `npx msgx identity`).
    MSGX_IDENTITY_DAY_BOUNDARY: flag(false),

    // Outbox relay (docs/outbox.md "Settings")
    MSGX_TOPIC_MSG: z.string().min(1).default('msgx.msg'),
    MSGX_TOPIC_SCHD: z.string().min(1).default('msgx.schd'),
    // Exactly once into Kafka (docs/outbox.md "Exactly once into Kafka"): the cursor of each target in
    // this compacted topic, written in the Kafka transaction of its batch.
    MSGX_TOPIC_OFFSETS: z
      .string()
      .default('msgx.offsets')
      .refine(
        (t) => topicNameProblem(t) === undefined,
        'must be a Kafka topic name (letters, digits, ".", "_", "-"; at most 249 characters)',
      ),
    MSGX_KAFKA_EXACTLY_ONCE: flag(true),
    // The deployment's name in its transactional.ids and cursor groups (`msgx.<stage>.…`); the
    // cloud stack sets it to the stage its IAM grant names. No dot: a grant on `msgx.<stage>.*`
    // would otherwise cover a stage named `<stage>.x` on a shared cluster.
    MSGX_STAGE: z
      .string()
      .regex(
        /^[A-Za-z0-9_-]{1,64}$/,
        'must be the deployment\'s name: 1 to 64 letters, digits, "-" or "_" (no dot, so one stage\'s transactional-id prefix never covers another\'s)',
      )
      .optional(),
    MSGX_TOPIC_PARTITIONS: positiveInt(6),
    MSGX_FANOUT_WEBHOOKS: commaList(),
    MSGX_DELIVERY_BATCH_SIZE: positiveInt(100),
    MSGX_DELIVERY_PUBLISH_TIMEOUT: duration('3s'),
    MSGX_DELIVERY_MAX_RETRY_COUNT: positiveInt(10),
    MSGX_DELIVERY_INITIAL_BACKOFF: duration('5s'),
    MSGX_DELIVERY_MAX_BACKOFF: duration('5m'),
    MSGX_DELIVERY_RETRY_STRATEGY: z.enum(['exponential_backoff']).default('exponential_backoff'),
    MSGX_DELIVERY_LEASE: duration('30s'),
    MSGX_SCHD_FLUSH_PERIOD: duration('3s'),
    MSGX_SCHD_FLUSH_LIMIT: positiveInt(500),
    MSGX_DELIVERY_POLL_INTERVAL: duration('1s'),
    MSGX_DELIVERY_TARGET_OVERRIDES: targetOverridesField(),

    // Transactional messages (docs/txmsg.md)
    MSGX_TX_CHECK_ALLOWED_ORIGINS: commaList(),
    MSGX_TX_CHECK_MAX: positiveInt(15),
    MSGX_TX_CHECK_INTERVAL: duration('60s'),
    // A later 0s would redeliver at once; a last one would leave no time to acknowledge (DEAD on sending).
    MSGX_TX_REDELIVERY_SCHEDULE: durationList('0s,1m,4m,10m,30m,60m', { zeroFirst: true }),
    MSGX_TX_REDELIVERY_BATCH: positiveInt(100),
    MSGX_TX_RETENTION: duration('168h'),
    MSGX_TX_TOPICS: commaList().refine(
      (list) => list.every((t) => topicNameProblem(t) === undefined),
      'must be a comma list of Kafka topic names (letters, digits, ".", "_", "-"; at most 249 characters each; not "." or "..")',
    ),
    MSGX_STALE_TARGET_AFTER: duration('5m'),
    // The relay is the commit-ordered log only (docs/outbox.md "Settings"). A deployment that still
    // asks for the per-event claim relay must hear that it is gone rather than get the log unawares.
    MSGX_OUTBOX_RELAY: z
      .literal('log', { message: 'the claim relay was removed: the relay is the commit-ordered log only; unset MSGX_OUTBOX_RELAY' })
      .optional(),

    // Lifecycle (docs/flights.md "Lifecycle")
    MSGX_HISTORY_RETENTION_DAYS: positiveInt(7),
    MSGX_PROC_RETENTION_DAYS: positiveInt(30),
    // Delivered msg_event rows older than this go (docs/outbox.md "Retention"); a message's trace
    // lists its events for as long as the message is traceable, so not below MSGX_PROC_RETENTION_DAYS.
    MSGX_EVENT_RETENTION_DAYS: positiveInt(30),
    MSGX_SNAP_LOG_RETENTION_DAYS: positiveInt(90),
    MSGX_HISTORY_SWEEP_AT: z
      .string()
      .regex(/^(?:[01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM in airport time, 00:00 to 23:59')
      .default('03:30'),
    MSGX_REQUEST_TIMEOUT: duration('10m'),
    // SNDR and RCVR of the requests msgx writes to COUTMSGS (docs/flights.md "Requests").
    MSGX_REQUEST_SENDER: wireCode('MSGX'),
    MSGX_REQUEST_RECEIVER: wireCode('FIMS'),
  })
  .superRefine((c, ctx) => {
    if (c.MSGX_EVENT_RETENTION_DAYS < c.MSGX_PROC_RETENTION_DAYS)
      ctx.addIssue({
        code: 'custom',
        path: ['MSGX_EVENT_RETENTION_DAYS'],
        message: 'must not be below MSGX_PROC_RETENTION_DAYS (a traceable message would lose its events)',
      });
    if (c.MSGX_BACKOFF_INITIAL > c.MSGX_BACKOFF_MAX)
      ctx.addIssue({ code: 'custom', path: ['MSGX_BACKOFF_INITIAL'], message: 'must not exceed MSGX_BACKOFF_MAX' });
    if (c.MSGX_DELIVERY_INITIAL_BACKOFF > c.MSGX_DELIVERY_MAX_BACKOFF)
      ctx.addIssue({
        code: 'custom',
        path: ['MSGX_DELIVERY_INITIAL_BACKOFF'],
        message: 'must not exceed MSGX_DELIVERY_MAX_BACKOFF',
      });
    if (c.MSGX_GAP_GRACE > c.MSGX_HEAD_DEADLINE)
      ctx.addIssue({
        code: 'custom',
        path: ['MSGX_GAP_GRACE'],
        message: 'must not exceed MSGX_HEAD_DEADLINE (a gap would hold the head longer than a failing message may)',
      });
    if (c.MSGX_BACKFILL_INITIAL > c.MSGX_BACKFILL_MAX)
      ctx.addIssue({ code: 'custom', path: ['MSGX_BACKFILL_INITIAL'], message: 'must not exceed MSGX_BACKFILL_MAX' });
    if (c.MSGX_DELIVERY_LEASE <= c.MSGX_DELIVERY_PUBLISH_TIMEOUT)
      ctx.addIssue({
        code: 'custom',
        path: ['MSGX_DELIVERY_LEASE'],
        message: 'must be longer than MSGX_DELIVERY_PUBLISH_TIMEOUT, or a lease could expire mid-publish',
      });
  });

type Env = z.infer<typeof schema>;

/** Every MSGX_* variable msgx reads at start (the README's configuration table). */
export const SETTING_NAMES: readonly string[] = Object.keys(schema.shape);

/** Read by the twin only (its HTTP server, embedded data, admin token): a cloud function never does. */
export const TWIN_ONLY_SETTINGS: readonly string[] = [
  'MSGX_HTTP_PORT',
  'MSGX_HTTP_HOST',
  'MSGX_HTTP_ALLOWED_HOSTS',
  'MSGX_HTTP_REQUEST_TIMEOUT',
  'MSGX_DATA_DIR',
  'MSGX_ADMIN_TOKEN',
];

/**
 * Checks settings as a start would, without starting (the CDK app at synth): one line per
 * problem, `VARIABLE: reason`, from the same schema loadConfig() validates with.
 */
export function settingProblems(env: Record<string, string | undefined>): string[] {
  const result = schema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '' && v !== undefined)));
  return result.success ? [] : result.error.issues.map((i) => `${String(i.path[0] ?? '?')}: ${i.message}`);
}

export interface Config {
  runtime: 'twin' | 'lambda';
  http: {
    port: number;
    host: string;
    allowedHosts: string[];
    requestTimeoutMs: number;
    maxBodyBytes: number;
    adminToken?: string;
    /** MSGX_OPERATOR_PRINCIPALS: IAM role ARNs allowed on the admin routes behind API Gateway. */
    operatorPrincipals: string[];
  };
  dataDir: string;
  pgUrl?: string;
  mailboxUrl?: string;
  mailboxSslCa?: string;
  kafka: { brokers: string[]; ssl: boolean; iamRegion?: string };
  timezone: string;
  shadow: boolean;
  signingSecret?: string;
  logLevel: Env['MSGX_LOG_LEVEL'];
  /** Which scheduled roles run, and whether a start pauses head processing first. */
  roles: { disabled: SwitchableRole[]; startPaused: boolean };
  pipeline: {
    pollIntervalMs: number;
    claimBatch: number;
    /** How long the pump waits for a skipped mailbox ID before declaring it a hole (0 = never). */
    gapGraceMs: number;
    /** How long a hole is still re-checked by ID on every poll (the sweep's re-scan covers after). */
    holeRecheckMs: number;
    groupCommit: number;
    maxAttempts: number;
    backoffInitialMs: number;
    backoffMaxMs: number;
    headDeadlineMs: number;
    backfillInitialMs: number;
    backfillMaxMs: number;
    /** Identity is SNDR|TYPE|STYP|SEQN|<DTTM day> (upstream resets SEQN daily) instead of SNDR|TYPE|STYP|SEQN. */
    identityDayBoundary: boolean;
  };
  /** The global delivery settings (DeliverySettings) plus topics, lease, schd flush and overrides. */
  outbox: DeliverySettings & {
    topicMsg: string;
    topicSchd: string;
    topicPartitions: number;
    fanoutWebhooks: string[];
    leaseMs: number;
    schdFlushPeriodMs: number;
    schdFlushLimit: number;
    /** Idle wait of the dispatcher loop between rounds (woken earlier by NOTIFY). */
    pollIntervalMs: number;
    /** Per-target delivery settings over the globals above (MSGX_DELIVERY_TARGET_OVERRIDES). */
    targetOverrides: Record<string, TargetOverride>;
    /** MSGX_STALE_TARGET_AFTER: a target whose head is older is listed as stale (stats, status, console). */
    staleAfterMs: number;
    /** MSGX_KAFKA_EXACTLY_ONCE with brokers: batches and cursors in one Kafka transaction. */
    exactlyOnce: boolean;
    /** MSGX_TOPIC_OFFSETS: the compacted topic of the targets' cursors. */
    topicOffsets: string;
    /** MSGX_STAGE, else the offsets topic's name: the `<stage>` of `msgx.<stage>.<target>` transactional ids. */
    stage: string;
  };
  txmsg: {
    checkAllowedOrigins: string[];
    checkMax: number;
    checkIntervalMs: number;
    redeliveryScheduleMs: number[];
    redeliveryBatch: number;
    retentionMs: number;
    /** MSGX_TX_TOPICS: the only topics producers may name; empty = any topic the cluster has. */
    topics: string[];
  };
  lifecycle: {
    historyRetentionDays: number;
    procRetentionDays: number;
    eventRetentionDays: number;
    snapLogRetentionDays: number;
    historySweepAt: string;
    requestTimeoutMs: number;
  };
  /** Who msgx's upstream requests are from and to (SNDR, RCVR). */
  requests: { sender: string; receiver: string };
}

/** Reads and validates the environment once; throws ConfigError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  assertProducerUntouched(env);
  const e = parseEnv(env);
  const runtime = e.MSGX_RUNTIME ?? (env.AWS_LAMBDA_FUNCTION_NAME ? 'lambda' : 'twin');
  const config: Config = {
    runtime,
    http: {
      port: e.MSGX_HTTP_PORT,
      host: e.MSGX_HTTP_HOST,
      allowedHosts: e.MSGX_HTTP_ALLOWED_HOSTS,
      requestTimeoutMs: e.MSGX_HTTP_REQUEST_TIMEOUT,
      maxBodyBytes: e.MSGX_MAX_BODY_BYTES,
      adminToken: e.MSGX_ADMIN_TOKEN,
      operatorPrincipals: e.MSGX_OPERATOR_PRINCIPALS,
    },
    dataDir: e.MSGX_DATA_DIR,
    pgUrl: e.MSGX_PG_URL,
    mailboxUrl: e.MSGX_MAILBOX_URL,
    mailboxSslCa: e.MSGX_MAILBOX_SSL_CA,
    kafka: { brokers: e.MSGX_KAFKA_BROKERS, ssl: e.MSGX_KAFKA_SSL, iamRegion: e.MSGX_KAFKA_IAM_REGION },
    timezone: e.MSGX_TIMEZONE,
    shadow: e.MSGX_SHADOW,
    signingSecret: e.MSGX_SIGNING_SECRET,
    logLevel: e.MSGX_LOG_LEVEL,
    roles: { disabled: [...new Set(e.MSGX_DISABLED_ROLES)] as SwitchableRole[], startPaused: e.MSGX_START_PAUSED },
    pipeline: pipelineSettings(e),
    outbox: outboxSettings(e),
    txmsg: {
      checkAllowedOrigins: e.MSGX_TX_CHECK_ALLOWED_ORIGINS,
      checkMax: e.MSGX_TX_CHECK_MAX,
      checkIntervalMs: e.MSGX_TX_CHECK_INTERVAL,
      redeliveryScheduleMs: e.MSGX_TX_REDELIVERY_SCHEDULE,
      redeliveryBatch: e.MSGX_TX_REDELIVERY_BATCH,
      retentionMs: e.MSGX_TX_RETENTION,
      topics: e.MSGX_TX_TOPICS,
    },
    lifecycle: {
      historyRetentionDays: e.MSGX_HISTORY_RETENTION_DAYS,
      procRetentionDays: e.MSGX_PROC_RETENTION_DAYS,
      eventRetentionDays: e.MSGX_EVENT_RETENTION_DAYS,
      snapLogRetentionDays: e.MSGX_SNAP_LOG_RETENTION_DAYS,
      historySweepAt: e.MSGX_HISTORY_SWEEP_AT,
      requestTimeoutMs: e.MSGX_REQUEST_TIMEOUT,
    },
    requests: { sender: e.MSGX_REQUEST_SENDER, receiver: e.MSGX_REQUEST_RECEIVER },
  };
  assertSafeForRuntime(config);
  return config;
}

type Parsed = z.infer<typeof schema>;

function parseEnv(env: Record<string, string | undefined>): Parsed {
  // An empty variable (`MSGX_PG_URL=` in a compose file) means "not set", not "invalid".
  const result = schema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${String(i.path[0] ?? '?')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}

function pipelineSettings(e: Parsed): Config['pipeline'] {
  return {
    pollIntervalMs: e.MSGX_POLL_INTERVAL_MS,
    claimBatch: e.MSGX_CLAIM_BATCH,
    gapGraceMs: e.MSGX_GAP_GRACE,
    holeRecheckMs: e.MSGX_HOLE_RECHECK,
    groupCommit: e.MSGX_GROUP_COMMIT,
    maxAttempts: e.MSGX_MAX_ATTEMPTS,
    backoffInitialMs: e.MSGX_BACKOFF_INITIAL,
    backoffMaxMs: e.MSGX_BACKOFF_MAX,
    headDeadlineMs: e.MSGX_HEAD_DEADLINE,
    backfillInitialMs: e.MSGX_BACKFILL_INITIAL,
    backfillMaxMs: e.MSGX_BACKFILL_MAX,
    identityDayBoundary: e.MSGX_IDENTITY_DAY_BOUNDARY,
  };
}

function outboxSettings(e: Parsed): Config['outbox'] {
  // The global delivery settings; each target may override them (MSGX_DELIVERY_TARGET_OVERRIDES).
  const delivery = {
    batchSize: e.MSGX_DELIVERY_BATCH_SIZE,
    publishTimeoutMs: e.MSGX_DELIVERY_PUBLISH_TIMEOUT,
    maxRetryCount: e.MSGX_DELIVERY_MAX_RETRY_COUNT,
    initialBackoffMs: e.MSGX_DELIVERY_INITIAL_BACKOFF,
    maxBackoffMs: e.MSGX_DELIVERY_MAX_BACKOFF,
    retryStrategy: e.MSGX_DELIVERY_RETRY_STRATEGY,
    leaseMs: e.MSGX_DELIVERY_LEASE,
  };
  return {
    topicMsg: e.MSGX_TOPIC_MSG + (e.MSGX_SHADOW ? '.shadow' : ''),
    topicSchd: e.MSGX_TOPIC_SCHD + (e.MSGX_SHADOW ? '.shadow' : ''),
    topicPartitions: e.MSGX_TOPIC_PARTITIONS,
    fanoutWebhooks: e.MSGX_FANOUT_WEBHOOKS,
    ...delivery,
    schdFlushPeriodMs: e.MSGX_SCHD_FLUSH_PERIOD,
    schdFlushLimit: e.MSGX_SCHD_FLUSH_LIMIT,
    pollIntervalMs: e.MSGX_DELIVERY_POLL_INTERVAL,
    targetOverrides: checkTargetOverrides({ ...delivery, targetOverrides: e.MSGX_DELIVERY_TARGET_OVERRIDES }),
    staleAfterMs: e.MSGX_STALE_TARGET_AFTER,
    exactlyOnce: e.MSGX_KAFKA_EXACTLY_ONCE && e.MSGX_KAFKA_BROKERS.length > 0,
    topicOffsets: e.MSGX_TOPIC_OFFSETS + (e.MSGX_SHADOW ? '.shadow' : ''),
    // Unset (the twin, tests): the offsets topic's name stands in, so twins and test runs on one
    // broker, each with its own offsets topic (and a shadow twin beside a live one), never fence
    // each other's producers. The cloud sets MSGX_STAGE to the name its grant covers.
    stage: e.MSGX_STAGE ?? e.MSGX_TOPIC_OFFSETS + (e.MSGX_SHADOW ? '.shadow' : ''),
  };
}

/**
 * The producer is always idempotent, acks=all, one request in flight (docs/outbox.md "Kafka producer").
 * A variable that looks like an attempt to change that is refused rather than silently ignored.
 */
const PRODUCER_OVERRIDES = /^MSGX_(KAFKA|PRODUCER)_(ACKS|IDEMPOTENT|IDEMPOTENCE|MAX_IN_FLIGHT.*|RETRIES|TRANSACTIONAL.*)$/;

function assertProducerUntouched(env: Record<string, string | undefined>): void {
  const tried = Object.keys(env).filter((k) => PRODUCER_OVERRIDES.test(k) && env[k] !== '');
  if (tried.length)
    throw new ConfigError(
      `unsafe configuration:\n${tried.map((k) => `  ${k}: the Kafka producer is always idempotent with acks=all and one request in flight; this cannot be configured`).join('\n')}`,
    );
}

/** The cloud must never run on the embedded database or write Kafka events to a local file. */
function assertSafeForRuntime(c: Config): void {
  if (c.runtime !== 'lambda') return;
  const problems: string[] = [];
  if (!c.pgUrl) problems.push('MSGX_PG_URL: required in the cloud (the embedded PGlite database is for the twin only)');
  // Kafka and the mailbox are bound only to the functions that use them (docs/deploy.md): the
  // poller has no brokers, the dispatcher no mailbox. Their twin stand-ins are refused where they
  // would be used instead (lib/outbox/publishers/build.ts, lib/outbox/topics.ts, lib/mailbox/open.ts).
  if (problems.length) throw new ConfigError(`unsafe configuration for the cloud:\n  ${problems.join('\n  ')}`);
}
