import type { Node } from 'constructs';

/**
 * Deployment settings. Everything that differs between stages (sizes, retention, protection,
 * alarm thresholds) comes from CDK context: `cdk.json` holds `stages.dev` and `stages.prod`, and
 * `-c stage=prod` picks one. Site facts (the shared mailbox, allowed check-back origins) are
 * top-level context keys so they can be passed with `-c key=value` at deploy time.
 */
export type BundlingMode = 'esbuild' | 'skip';
export type UpstreamAuth = 'iam' | 'jwt' | 'lambda';
export type LambdaRuntime = 'nodejs20.x' | 'nodejs22.x' | 'nodejs24.x';
export type FunctionRole = 'ingress' | 'poller' | 'pump' | 'dispatcher' | 'sweep' | 'migrate';
export const SCHEDULED_ROLES = ['poller', 'pump', 'dispatcher', 'sweep'] as const;
export type ScheduledRole = (typeof SCHEDULED_ROLES)[number];

export interface StageSettings {
  /** VPC address range; keep it clear of the mailbox network if the two are peered. */
  vpcCidr: string;
  natGateways: number;
  db: {
    instanceType: string;
    engineVersion: '15' | '16';
    allocatedStorageGb: number;
    maxAllocatedStorageGb: number;
    multiAz: boolean;
    backupRetentionDays: number;
    deletionProtection: boolean;
    /** What happens to the database when its stack is deleted. */
    removalPolicy: 'destroy' | 'snapshot' | 'retain';
    rotationDays: number;
  };
  kafka: {
    instanceType: string;
    /** Brokers in total; a multiple of the two availability zones. */
    brokers: number;
    volumeGb: number;
  };
  functions: {
    logRetentionDays: number;
    memoryMb: Record<FunctionRole, number>;
    timeoutSeconds: Record<FunctionRole, number>;
  };
  api: {
    throttleRatePerSecond: number;
    throttleBurst: number;
    accessLogRetentionDays: number;
  };
  alarms: {
    headAgeSeconds: number;
    deadCount: number;
    backlog: number;
    oldestPendingEventSeconds: number;
    lambdaErrors: number;
    lambdaThrottles: number;
    /** The pump runs with reserved concurrency 1: ingress kicks that find it busy are throttled by design. */
    pumpThrottles: number;
    evaluationMinutes: number;
  };
}

export interface MsgxSettings {
  stage: string;
  /** Stack name prefix, e.g. `Msgx-dev`. */
  prefix: string;
  account?: string;
  region?: string;
  bundling: BundlingMode;
  /** Lambda runtime, `nodejs20.x` (the design's target) unless `-c lambdaRuntime=nodejs22.x|nodejs24.x`. */
  lambdaRuntime: LambdaRuntime;
  nag: boolean;
  settings: StageSettings;
  mailbox: {
    host: string;
    port: number;
    database: string;
    secretArn: string;
    /** Security group of the mailbox; when given, an ingress rule for the functions is added to it. */
    securityGroupId?: string;
  };
  api: {
    upstreamAuth: UpstreamAuth;
    jwtIssuer?: string;
    jwtAudience: string[];
    authorizerFunctionArn?: string;
  };
  kafka: {
    topicMsg: string;
    topicSchd: string;
    topicPartitions: number;
    /** Topic name patterns (within the msgx cluster) transactional producers may name. */
    txTopicPatterns: string[];
  };
  timezone: string;
  txCheckAllowedOrigins: string;
  alarmEmail?: string;
}

const PLACEHOLDER_MAILBOX_HOST = 'mailbox.invalid';
export const PLACEHOLDER_MAILBOX_SECRET_ARN =
  'arn:aws:secretsmanager:us-east-1:111111111111:secret:msgx/mailbox-PLACEH';

function str(node: Node, key: string): string | undefined {
  const v: unknown = node.tryGetContext(key);
  if (v === undefined || v === null || v === '') return undefined;
  return String(v);
}

function list(node: Node, key: string, fallback: string[]): string[] {
  const v: unknown = node.tryGetContext(key);
  if (v === undefined || v === null || v === '') return fallback;
  if (Array.isArray(v)) return v.map(String);
  return String(v)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function deepMerge<T>(base: T, over: unknown): T {
  if (!isObject(over) || !isObject(base)) return (over === undefined ? base : over) as T;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = deepMerge((base as Record<string, unknown>)[k], v);
  return out as T;
}

/** Built-in defaults (a small dev stage); `cdk.json` `stages.<name>` is merged over them. */
export const DEFAULT_STAGE: StageSettings = {
  vpcCidr: '10.60.0.0/16',
  natGateways: 1,
  db: {
    instanceType: 't4g.micro',
    engineVersion: '16',
    allocatedStorageGb: 20,
    maxAllocatedStorageGb: 100,
    multiAz: false,
    backupRetentionDays: 7,
    deletionProtection: false,
    removalPolicy: 'snapshot',
    rotationDays: 30,
  },
  kafka: { instanceType: 'kafka.t3.small', brokers: 2, volumeGb: 20 },
  functions: {
    logRetentionDays: 14,
    memoryMb: { ingress: 512, poller: 256, pump: 512, dispatcher: 512, sweep: 256, migrate: 512 },
    // Scheduled: the loop runs for timeout − 10 s (lib/jobs/coldStart.ts BUDGET_MARGIN_MS), so 65 s
    // ends each loop at ~55 s, releasing the advisory lock before the next once-a-minute tick.
    timeoutSeconds: { ingress: 29, poller: 65, pump: 65, dispatcher: 65, sweep: 65, migrate: 300 },
  },
  api: { throttleRatePerSecond: 50, throttleBurst: 100, accessLogRetentionDays: 30 },
  alarms: {
    headAgeSeconds: 600,
    deadCount: 0,
    backlog: 1000,
    oldestPendingEventSeconds: 600,
    lambdaErrors: 1,
    lambdaThrottles: 1,
    pumpThrottles: 50,
    evaluationMinutes: 5,
  },
};

function num(node: Node, key: string, fallback: number): number {
  const v = str(node, key);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`context ${key} must be a number, got ${JSON.stringify(v)}`);
  return n;
}

function bool(node: Node, key: string, fallback: boolean): boolean {
  const v = str(node, key);
  if (v === undefined) return fallback;
  return !['false', '0', 'no', 'off'].includes(v.toLowerCase());
}

/** Reads and checks every setting once; errors name the context key. */
export function readSettings(node: Node): MsgxSettings {
  const stage = str(node, 'stage') ?? 'dev';
  if (!/^[a-z][a-z0-9-]{0,15}$/.test(stage)) throw new Error(`context stage must match [a-z][a-z0-9-]{0,15}, got ${stage}`);
  const stages: unknown = node.tryGetContext('stages');
  const stageOverrides = isObject(stages) ? stages[stage] : undefined;
  if (isObject(stages) && stageOverrides === undefined)
    throw new Error(`context stages has no entry "${stage}" (have: ${Object.keys(stages).join(', ')})`);
  const settings = deepMerge(DEFAULT_STAGE, stageOverrides);
  if (settings.kafka.brokers % 2 !== 0) throw new Error('stages.<stage>.kafka.brokers must be a multiple of 2 (two AZs)');
  for (const role of SCHEDULED_ROLES) {
    const t = settings.functions.timeoutSeconds[role];
    // Below 60 s the loop would end long before the next tick; see docs/deploy.md for the budget.
    if (t < 60 || t > 900) throw new Error(`stages.<stage>.functions.timeoutSeconds.${role} must be 60..900, got ${t}`);
  }
  if (settings.functions.timeoutSeconds.ingress > 29)
    throw new Error('stages.<stage>.functions.timeoutSeconds.ingress must be <= 29 (API Gateway integration limit)');

  const bundling = (str(node, 'bundling') ?? 'esbuild') as BundlingMode;
  if (bundling !== 'esbuild' && bundling !== 'skip') throw new Error(`context bundling must be esbuild|skip, got ${bundling}`);

  const lambdaRuntime = (str(node, 'lambdaRuntime') ?? 'nodejs20.x') as LambdaRuntime;
  if (!['nodejs20.x', 'nodejs22.x', 'nodejs24.x'].includes(lambdaRuntime))
    throw new Error(`context lambdaRuntime must be nodejs20.x|nodejs22.x|nodejs24.x, got ${lambdaRuntime}`);

  const upstreamAuth = (str(node, 'upstreamAuth') ?? 'iam') as UpstreamAuth;
  if (!['iam', 'jwt', 'lambda'].includes(upstreamAuth))
    throw new Error(`context upstreamAuth must be iam|jwt|lambda, got ${upstreamAuth}`);
  const jwtIssuer = str(node, 'jwtIssuer');
  const authorizerFunctionArn = str(node, 'authorizerFunctionArn');
  if (upstreamAuth === 'jwt' && !jwtIssuer) throw new Error('context upstreamAuth=jwt needs jwtIssuer (and jwtAudience)');
  if (upstreamAuth === 'lambda' && !authorizerFunctionArn)
    throw new Error('context upstreamAuth=lambda needs authorizerFunctionArn');

  const mailboxHost = str(node, 'mailboxHost') ?? PLACEHOLDER_MAILBOX_HOST;
  const mailboxSecretArn = str(node, 'mailboxSecretArn') ?? PLACEHOLDER_MAILBOX_SECRET_ARN;
  const placeholders = mailboxHost === PLACEHOLDER_MAILBOX_HOST || mailboxSecretArn === PLACEHOLDER_MAILBOX_SECRET_ARN;
  // A prod deploy against the placeholder mailbox would come up and fail every poll; refuse it early.
  if (placeholders && bool(node, 'requireMailbox', stage === 'prod'))
    throw new Error(`stage ${stage} needs -c mailboxHost=... -c mailboxSecretArn=... (the shared MySQL mailbox)`);
  if (!/^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+-[A-Za-z0-9]{6}$/.test(mailboxSecretArn))
    throw new Error(`context mailboxSecretArn must be a complete secret ARN (ending in -XXXXXX), got ${mailboxSecretArn}`);

  return {
    stage,
    prefix: `Msgx-${stage}`,
    account: str(node, 'account'),
    region: str(node, 'region'),
    bundling,
    lambdaRuntime,
    nag: bool(node, 'nag', true),
    settings,
    mailbox: {
      host: mailboxHost,
      port: num(node, 'mailboxPort', 3306),
      database: str(node, 'mailboxDatabase') ?? 'mailbox',
      secretArn: mailboxSecretArn,
      securityGroupId: str(node, 'mailboxSecurityGroupId'),
    },
    api: { upstreamAuth, jwtIssuer, jwtAudience: list(node, 'jwtAudience', []), authorizerFunctionArn },
    kafka: {
      topicMsg: str(node, 'topicMsg') ?? 'msgx.msg',
      topicSchd: str(node, 'topicSchd') ?? 'msgx.schd',
      topicPartitions: num(node, 'topicPartitions', 6),
      txTopicPatterns: list(node, 'txTopicPatterns', ['*']),
    },
    timezone: str(node, 'timezone') ?? 'Asia/Shanghai',
    txCheckAllowedOrigins: list(node, 'txCheckAllowedOrigins', []).join(','),
    alarmEmail: str(node, 'alarmEmail'),
  };
}
