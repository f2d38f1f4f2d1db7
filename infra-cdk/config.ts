import type { Node } from 'constructs';
import { SETTING_NAMES, settingProblems, TWIN_ONLY_SETTINGS } from '../lib/config/config.ts';
import { FUNCTION_ROLES, type FunctionRole, ROLE_CATALOGUE, SCHEDULED_ROLES, type ScheduledRole } from '../lib/app/catalogue.ts';
import { OPERATOR_ROLE_ARN, POOL_SIZE } from '../lib/constants.ts';

/**
 * Deployment settings. Everything that differs between stages (sizes, retention, protection,
 * alarm thresholds) comes from CDK context: `cdk.json` holds `stages.dev` and `stages.prod`, and
 * `-c stage=prod` picks one. Site facts (the shared mailbox, allowed check-back origins) are
 * top-level context keys so they can be passed with `-c key=value` at deploy time.
 */
export type BundlingMode = 'esbuild' | 'skip';
export type UpstreamAuth = 'iam' | 'jwt' | 'lambda';
export type LambdaRuntime = 'nodejs20.x' | 'nodejs22.x' | 'nodejs24.x';
// Roles come from lib/app/catalogue.ts, the dependency-free catalogue the runtime reads too.
export { FUNCTION_ROLES, type FunctionRole, SCHEDULED_ROLES, type ScheduledRole };

/** Existing infrastructure a stage uses instead of creating its own (brownfield); see docs/deploy.md. */
export interface ExistingSettings {
  vpc?: {
    id: string;
    /** The VPC's CIDR (the endpoints' security group admits it). */
    cidr: string;
    availabilityZones: string[];
    /** Private subnets with egress (NAT/TGW) for the functions, one per AZ, same order. */
    appSubnetIds: string[];
    /** Subnets for the database and the brokers when msgx creates them; defaults to appSubnetIds. */
    dataSubnetIds?: string[];
    /** Create msgx's interface endpoints in it (off: the VPC usually has its own). */
    createEndpoints?: boolean;
  };
  postgres?: {
    /** Host name of the instance (or cluster writer) endpoint. */
    endpoint: string;
    port?: number;
    database?: string;
    /** Complete ARN of the secret `{username, password}` msgx connects with (rotated by its owner). */
    secretArn: string;
    /** The database's security group: msgx adds an ingress rule for its functions. */
    securityGroupId: string;
  };
  msk?: {
    clusterArn: string;
    /** IAM bootstrap broker string (host:9098,…). */
    bootstrapBrokers: string;
    /** The brokers' security group: msgx adds an ingress rule on 9098. */
    securityGroupId?: string;
    /** Number of brokers, for the per-broker disk alarms. */
    brokers?: number;
  };
}

export interface StageSettings {
  /** VPC address range; keep it clear of the mailbox network if the two are peered. */
  vpcCidr: string;
  /** Availability zones of a VPC msgx creates (2 or 3); prod uses 3 for the brokers. */
  azs: number;
  natGateways: number;
  /**
   * IAM role ARNs of this stage's operators: the only callers the admin routes answer
   * (MSGX_OPERATOR_PRINCIPALS; docs/deploy.md "Operators and least privilege"). Empty: nobody.
   */
  operatorPrincipals: string[];
  existing: ExistingSettings;
  /**
   * msgx settings (README "Configuration", the MSGX_* variables) for this stage's functions,
   * validated at synth by the schema the functions validate with at start. Not the ones the stack
   * sets itself (connections, secrets) nor the twin's own.
   */
  env: Record<string, string | number | boolean>;
  db: {
    instanceType: string;
    /** Full version (`16.13`, `17.9`): cfn-lint flags bare majors as deprecated (W3691). */
    engineVersion: string;
    allocatedStorageGb: number;
    maxAllocatedStorageGb: number;
    multiAz: boolean;
    backupRetentionDays: number;
    deletionProtection: boolean;
    /** What happens to the database when its stack is deleted. */
    removalPolicy: 'destroy' | 'snapshot' | 'retain';
    rotationDays: number;
    /**
     * The instance's max_connections, which the functions' concurrency is sized against
     * (connectionBudget). Default: RDS's formula for the instance class; give the real value
     * (`SHOW max_connections`) for a database msgx does not create or a class it does not know.
     */
    maxConnections?: number;
  };
  kafka: {
    instanceType: string;
    /** Brokers in total; a multiple of the availability zones. */
    brokers: number;
    volumeGb: number;
    /** Storage autoscaling ceiling per broker (GiB); 0 turns autoscaling off. */
    maxVolumeGb: number;
    /** Cluster configuration: topics created without a factor get this one. */
    replicationFactor: number;
    minInsyncReplicas: number;
  };
  functions: {
    logRetentionDays: number;
    memoryMb: Record<FunctionRole, number>;
    timeoutSeconds: Record<FunctionRole, number>;
    /**
     * Reserved concurrency per role. The ingress's defaults to what the connection budget leaves
     * for it (connectionBudget); the other roles have none unless set (the advisory lock is the guard).
     */
    reservedConcurrency: Partial<Record<FunctionRole, number>>;
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
    /** Consecutive minutes a scheduled role may find its lock taken before it alarms. */
    lockTakenMinutes: number;
    /** Minutes without a heartbeat from a scheduled role before it alarms. */
    heartbeatMinutes: number;
    /** Mailbox back-fills failing and still owed (gauge), for evaluationMinutes. */
    backfillFailures: number;
    /** Delivery targets the dispatcher reports stalled (gauge). */
    stalledTargets: number;
    /** Outbox events not yet delivered (gauge). */
    outboxBacklog: number;
    rdsCpuPercent: number;
    rdsFreeStorageGb: number;
    rdsConnections: number;
    /** Percent of a broker's data volume in use. */
    mskDiskPercent: number;
    api5xx: number;
  };
}

export interface MsgxSettings {
  stage: string;
  /** Stack name prefix, e.g. `Msgx-dev`. */
  prefix: string;
  account?: string;
  region?: string;
  bundling: BundlingMode;
  /** Lambda runtime, `nodejs22.x` unless `-c lambdaRuntime=nodejs24.x` (or `nodejs20.x`, deprecated). */
  lambdaRuntime: LambdaRuntime;
  /**
   * The AWS Parameters and Secrets Lambda Extension on every function (context
   * `secretsExtension`, default true): secrets read over localhost at cold start, no SDK import.
   * Off where the layer is not published for ARM64; the code then reads with the SDK.
   */
  secretsExtension: boolean;
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
    /** The topics transactional producers may name (MSGX_TX_TOPICS): the dispatcher may write these and msgx's only. */
    txTopics: string[];
    /** MSGX_SHADOW: msgx writes `<topic>.shadow` instead. */
    shadow: boolean;
  };
  /** Every msgx setting the functions get, as environment variables (stage `env` over the context keys). */
  functionEnv: Record<string, string>;
  timezone: string;
  txCheckAllowedOrigins: string;
  alarmEmail?: string;
}

/**
 * Values that only ever appear in documentation: deploying them "succeeds" and then every cold
 * start fails. Any setting naming a resource is checked against these at synth time.
 */
const PLACEHOLDER_ACCOUNTS = ['111111111111', '123456789012', '000000000000'];
const PLACEHOLDER_WORDS = /placeholder|example|changeme|\.invalid\b|xxxxxx/i;

export function refusePlaceholder(setting: string, value: string | undefined): void {
  if (value === undefined) return;
  const account = PLACEHOLDER_ACCOUNTS.find((a) => value.includes(a));
  if (account || PLACEHOLDER_WORDS.test(value))
    throw new Error(
      `context ${setting} looks like a placeholder (${JSON.stringify(value)}${account ? `: account ${account}` : ''}); give the real value`,
    );
}

const SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+-[A-Za-z0-9]{6}$/;
const MSK_ARN = /^arn:aws[a-z-]*:kafka:[a-z0-9-]+:\d{12}:cluster\/([A-Za-z0-9-]+)\/[A-Za-z0-9-]+$/;

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

/** A setting of every scheduled role, as its catalogue entry gives it. */
function fromCatalogue(key: 'memoryMb' | 'timeoutSeconds'): Record<ScheduledRole, number> {
  return Object.fromEntries(SCHEDULED_ROLES.map((role) => [role, ROLE_CATALOGUE[role][key]])) as Record<ScheduledRole, number>;
}

/** Built-in defaults (a small dev stage); `cdk.json` `stages.<name>` is merged over them. */
export const DEFAULT_STAGE: StageSettings = {
  vpcCidr: '10.60.0.0/16',
  azs: 2,
  natGateways: 1,
  operatorPrincipals: [],
  existing: {},
  env: {},
  db: {
    instanceType: 't4g.micro',
    engineVersion: '16.13',
    allocatedStorageGb: 20,
    maxAllocatedStorageGb: 100,
    multiAz: false,
    backupRetentionDays: 7,
    deletionProtection: false,
    removalPolicy: 'snapshot',
    rotationDays: 30,
  },
  kafka: {
    instanceType: 'kafka.t3.small',
    brokers: 2,
    volumeGb: 20,
    maxVolumeGb: 100,
    replicationFactor: 2,
    minInsyncReplicas: 1,
  },
  functions: {
    logRetentionDays: 14,
    // Scheduled roles: their catalogue entries (lib/app/catalogue.ts, which explains the timeouts).
    memoryMb: { ingress: 512, ...fromCatalogue('memoryMb'), migrate: 512 },
    timeoutSeconds: { ingress: 29, ...fromCatalogue('timeoutSeconds'), migrate: 300 },
    reservedConcurrency: {},
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
    lockTakenMinutes: 3,
    heartbeatMinutes: 5,
    backfillFailures: 0,
    stalledTargets: 0,
    outboxBacklog: 5000,
    rdsCpuPercent: 80,
    rdsFreeStorageGb: 5,
    rdsConnections: 80,
    mskDiskPercent: 80,
    api5xx: 5,
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

/**
 * Every problem with the settings at once, one line each naming the setting: what `cdk synth`
 * prints (infra-cdk/app.ts) instead of a stack trace, so a first run lists everything to fix.
 */
export class SettingsError extends Error {
  constructor(
    readonly stage: string,
    readonly problems: string[],
  ) {
    super(
      `msgx: cannot synthesize stage ${stage}; fix ${problems.length === 1 ? 'this setting' : `these ${problems.length} settings`} (-c key=value or cdk.json, see docs/deploy.md "Parameters"):\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
    this.name = 'SettingsError';
  }
}

/** Reads and checks every setting once; a SettingsError lists every problem, each naming its context key. */
export function readSettings(node: Node): MsgxSettings {
  const problems: string[] = [];
  // Runs one check; its error becomes one line of the report instead of ending the read.
  const check: Check = (fn) => {
    try {
      return fn();
    } catch (err) {
      if (!(err instanceof Error) || err instanceof TypeError || err instanceof ReferenceError) throw err;
      problems.push(err.message);
      return undefined;
    }
  };
  const stageGiven = str(node, 'stage') ?? 'dev';
  check(() => {
    if (!/^[a-z][a-z0-9-]{0,15}$/.test(stageGiven)) throw new Error(`context stage must match [a-z][a-z0-9-]{0,15}, got ${stageGiven}`);
  });
  const stage = stageGiven;
  const stages: unknown = node.tryGetContext('stages');
  const stageOverrides = isObject(stages) ? stages[stage] : undefined;
  if (isObject(stages) && stageOverrides === undefined)
    problems.push(`context stages has no entry "${stage}" (have: ${Object.keys(stages).join(', ')})`);
  const settings = deepMerge(DEFAULT_STAGE, stageOverrides);
  const at = `stages.${stage}`;
  checkStage(at, settings, check);
  // A site may name its operators at deploy (`-c operatorPrincipals=arn…,arn…`) instead of in cdk.json.
  const siteOperators = node.tryGetContext('operatorPrincipals') as unknown;
  if (siteOperators !== undefined) settings.operatorPrincipals = list(node, 'operatorPrincipals', []);
  check(() => checkOperators(at, settings.operatorPrincipals));
  const choices = readChoices(node, check);
  const site = readSite(node, stage, check);
  for (const [key, value] of flatten(`${at}.existing`, settings.existing)) check(() => refusePlaceholder(key, value));

  const mailboxPort = check(() => num(node, 'mailboxPort', 3306)) ?? 3306;
  const topicPartitions = check(() => num(node, 'topicPartitions', 6)) ?? 6;
  if (node.tryGetContext('txTopicPatterns') !== undefined)
    problems.push(
      `context txTopicPatterns is no longer read: list the topics producers may name in ${at}.env.MSGX_TX_TOPICS (the dispatcher may write those and msgx's own only)`,
    );
  const functionEnv = readFunctionEnv(
    at,
    settings.env,
    {
      MSGX_TIMEZONE: str(node, 'timezone'),
      MSGX_TOPIC_MSG: str(node, 'topicMsg'),
      MSGX_TOPIC_SCHD: str(node, 'topicSchd'),
      MSGX_TOPIC_PARTITIONS: String(topicPartitions),
      MSGX_TX_CHECK_ALLOWED_ORIGINS: list(node, 'txCheckAllowedOrigins', []).join(',') || undefined,
      MSGX_TX_TOPICS: list(node, 'txTopics', []).join(',') || undefined,
    },
    problems,
  );
  check(() =>
    checkSharedCluster(at, stage, settings.existing.msk?.clusterArn, stages, functionEnv, {
      msg: str(node, 'topicMsg') ?? 'msgx.msg',
      schd: str(node, 'topicSchd') ?? 'msgx.schd',
    }),
  );
  if (problems.length > 0) throw new SettingsError(stage, problems);

  return {
    stage,
    prefix: `Msgx-${stage}`,
    account: str(node, 'account'),
    region: str(node, 'region'),
    bundling: choices.bundling,
    lambdaRuntime: choices.lambdaRuntime,
    secretsExtension: bool(node, 'secretsExtension', true),
    nag: bool(node, 'nag', true),
    settings,
    mailbox: {
      host: site.mailboxHost!,
      port: mailboxPort,
      database: str(node, 'mailboxDatabase') ?? 'mailbox',
      secretArn: site.mailboxSecretArn!,
      securityGroupId: str(node, 'mailboxSecurityGroupId'),
    },
    api: {
      upstreamAuth: choices.upstreamAuth,
      jwtIssuer: site.jwtIssuer,
      jwtAudience: list(node, 'jwtAudience', []),
      authorizerFunctionArn: site.authorizerFunctionArn,
    },
    kafka: {
      topicMsg: functionEnv.MSGX_TOPIC_MSG ?? 'msgx.msg',
      topicSchd: functionEnv.MSGX_TOPIC_SCHD ?? 'msgx.schd',
      topicPartitions: Number(functionEnv.MSGX_TOPIC_PARTITIONS ?? 6),
      txTopics: splitList(functionEnv.MSGX_TX_TOPICS),
      shadow: ['1', 'true', 'on', 'yes'].includes((functionEnv.MSGX_SHADOW ?? '').toLowerCase()),
    },
    timezone: functionEnv.MSGX_TIMEZONE ?? 'Asia/Shanghai',
    txCheckAllowedOrigins: functionEnv.MSGX_TX_CHECK_ALLOWED_ORIGINS ?? '',
    functionEnv,
    alarmEmail: site.alarmEmail,
  };
}

/** Memory of RDS instance classes (GiB), by size, for RDS's default max_connections. */
const CLASS_MEMORY_GIB: Record<string, Record<string, number>> = {
  burstable: { micro: 1, small: 2, medium: 4, large: 8, xlarge: 16, '2xlarge': 32 },
  general: { large: 8, xlarge: 16, '2xlarge': 32, '4xlarge': 64, '8xlarge': 128, '12xlarge': 192, '16xlarge': 256 },
  memory: { large: 16, xlarge: 32, '2xlarge': 64, '4xlarge': 128, '8xlarge': 256, '12xlarge': 384, '16xlarge': 512 },
};

/**
 * RDS for PostgreSQL's default max_connections, LEAST(DBInstanceClassMemory / 9531392, 5000), from
 * the class's nominal memory: an upper estimate (DBInstanceClassMemory leaves out what RDS keeps
 * for itself), undefined for a class this table does not know.
 */
export function defaultMaxConnections(instanceType: string): number | undefined {
  const m = /^(?:db\.)?([a-z]+)(\d+)([a-z]*)\.(\w+)$/.exec(instanceType);
  if (!m) return undefined;
  const [, family, , , size] = m;
  const kind = family === 't' ? 'burstable' : family === 'm' ? 'general' : family === 'r' ? 'memory' : undefined;
  const gib = kind ? CLASS_MEMORY_GIB[kind]![size!] : undefined;
  return gib === undefined ? undefined : Math.min(5000, Math.floor((gib * 1024 ** 3) / 9531392));
}

/**
 * PostgreSQL connections a stage's functions may open, against the instance's max_connections.
 * Set aside first: the slots only superusers get (superuser_reserved_connections; msgx's users
 * are not superusers), one lock holder per scheduled role (its pool, its lock session and its
 * LISTEN session: the lock lets one work at a time), the deploy-time migrator and an operator's
 * CLI on the database. What is left, divided by one environment's pool, is how many ingress
 * environments the instance can take: the ingress's reserved concurrency, by default this or the
 * API's throttle burst if smaller (docs/deploy.md "Connection budget").
 */
export const CONNECTION_BUDGET = {
  superuserReserved: 3,
  perScheduledRole: POOL_SIZE.lambda + 2,
  migrate: POOL_SIZE.migrate,
  operator: POOL_SIZE.operator,
  perIngress: POOL_SIZE.lambda,
} as const;

export interface ConnectionBudget {
  maxConnections: number;
  /** Connections set aside before the ingress: superuser slots, scheduled roles, migrator, operator. */
  setAside: number;
  /** The most ingress environments the rest holds. */
  ingressMax: number;
}

export function connectionBudget(maxConnections: number): ConnectionBudget {
  const b = CONNECTION_BUDGET;
  const setAside = b.superuserReserved + SCHEDULED_ROLES.length * b.perScheduledRole + b.migrate + b.operator;
  return { maxConnections, setAside, ingressMax: Math.floor((maxConnections - setAside) / b.perIngress) };
}

/**
 * The stage's max_connections and the ingress's reserved concurrency, derived when not given and
 * refused, naming the setting, when the instance cannot hold them.
 */
function checkConnections(at: string, settings: StageSettings, check: Check): void {
  const db = settings.db;
  const given = db.maxConnections;
  check(() => {
    if (given !== undefined && (!Number.isInteger(given) || given < 1))
      throw new Error(`${at}.db.maxConnections must be a positive integer (the instance's max_connections), got ${JSON.stringify(given)}`);
  });
  const max = given ?? (settings.existing.postgres ? undefined : defaultMaxConnections(db.instanceType));
  if (max === undefined) {
    check(() => {
      throw new Error(
        settings.existing.postgres
          ? `${at}.db.maxConnections is required with ${at}.existing.postgres: the database's max_connections (SHOW max_connections), less what its other users hold`
          : `${at}.db.maxConnections is required for instance class ${db.instanceType} (no default known): the instance's max_connections`,
      );
    });
    return;
  }
  if (!Number.isInteger(max) || max < 1) return;
  // Copies: a stage without overrides shares DEFAULT_STAGE's objects.
  settings.db = { ...db, maxConnections: max };
  const reserved = { ...settings.functions.reservedConcurrency };
  settings.functions = { ...settings.functions, reservedConcurrency: reserved };
  const budget = connectionBudget(max);
  const why = `${max} connections (${at}.db.maxConnections) less ${budget.setAside} set aside (superuser slots, scheduled roles, migrator, operator) hold ${Math.max(0, budget.ingressMax)} ingress environments of ${CONNECTION_BUDGET.perIngress}`;
  check(() => {
    if (budget.ingressMax < 1) throw new Error(`${at}.db.maxConnections ${max} is too small: ${why}; use a larger instance class`);
    const n = reserved.ingress;
    // No more than the API lets in at once: a reservation beyond it is taken from the account's
    // concurrency for nothing (and an account's quota must keep 100 unreserved).
    if (n === undefined) reserved.ingress = Math.min(budget.ingressMax, settings.api.throttleBurst);
    else if (Number.isInteger(n) && n > budget.ingressMax)
      throw new Error(`${at}.functions.reservedConcurrency.ingress ${n} exceeds the connection budget: ${why}`);
  });
}

/** Runs one check of the settings; a refusal is collected rather than thrown. */
type Check = <T>(fn: () => T) => T | undefined;

/** The stage block's own rules: sizes, versions, timeouts, reservations, existing resources. */
function checkStage(at: string, settings: StageSettings, check: Check): void {
  check(() => {
    if (![2, 3].includes(settings.azs)) throw new Error(`${at}.azs must be 2 or 3, got ${settings.azs}`);
  });
  check(() => {
    if (!/^(15|16|17)\.\d+$/.test(settings.db.engineVersion))
      throw new Error(`${at}.db.engineVersion must be a full PostgreSQL 15/16/17 version such as 16.13, got ${settings.db.engineVersion}`);
  });
  check(() => checkKafka(at, settings));
  for (const role of SCHEDULED_ROLES)
    check(() => {
      const t = settings.functions.timeoutSeconds[role];
      // Below 60 s the loop would end long before the next tick; see docs/deploy.md for the budget.
      if (t < 60 || t > 900) throw new Error(`${at}.functions.timeoutSeconds.${role} must be 60..900, got ${t}`);
    });
  check(() => {
    if (settings.functions.timeoutSeconds.ingress > 29)
      throw new Error(`${at}.functions.timeoutSeconds.ingress must be <= 29 (API Gateway integration limit)`);
  });
  for (const [role, n] of Object.entries(settings.functions.reservedConcurrency))
    check(() => {
      // 0 would stop the function altogether; an account keeps 100 unreserved, so keep these small.
      if (!Number.isInteger(n) || n < 1)
        throw new Error(`${at}.functions.reservedConcurrency.${role} must be a positive integer, got ${n}`);
    });
  checkConnections(at, settings, check);
  check(() => checkExisting(at, settings.existing));
}

/** How to build: bundling, the Lambda runtime and the upstream routes' authorizer. */
function readChoices(node: Node, check: Check) {
  const bundling = (str(node, 'bundling') ?? 'esbuild') as BundlingMode;
  check(() => {
    if (bundling !== 'esbuild' && bundling !== 'skip') throw new Error(`context bundling must be esbuild|skip, got ${bundling}`);
  });

  const lambdaRuntime = (str(node, 'lambdaRuntime') ?? 'nodejs22.x') as LambdaRuntime;
  check(() => {
    if (!['nodejs20.x', 'nodejs22.x', 'nodejs24.x'].includes(lambdaRuntime))
      throw new Error(`context lambdaRuntime must be nodejs20.x|nodejs22.x|nodejs24.x, got ${lambdaRuntime}`);
  });

  const upstreamAuth = (str(node, 'upstreamAuth') ?? 'iam') as UpstreamAuth;
  const jwtIssuer = str(node, 'jwtIssuer');
  const authorizerFunctionArn = str(node, 'authorizerFunctionArn');
  check(() => {
    if (!['iam', 'jwt', 'lambda'].includes(upstreamAuth))
      throw new Error(`context upstreamAuth must be iam|jwt|lambda, got ${upstreamAuth}`);
    if (upstreamAuth === 'jwt' && !jwtIssuer) throw new Error('context upstreamAuth=jwt needs jwtIssuer (and jwtAudience)');
    if (upstreamAuth === 'lambda' && !authorizerFunctionArn) throw new Error('context upstreamAuth=lambda needs authorizerFunctionArn');
  });

  return { bundling, lambdaRuntime, upstreamAuth };
}

/** The site's resources and contacts (`-c` at deploy or cdk.json), none of them a placeholder. */
function readSite(node: Node, stage: string, check: Check) {
  const jwtIssuer = str(node, 'jwtIssuer');
  const authorizerFunctionArn = str(node, 'authorizerFunctionArn');
  // Every stage needs the real mailbox: a placeholder deploys "successfully" and then fails every poll.
  const mailboxHost = str(node, 'mailboxHost');
  const mailboxSecretArn = str(node, 'mailboxSecretArn');
  check(() => {
    if (!mailboxHost) throw new Error(`context mailboxHost is required (stage ${stage}): the shared MySQL mailbox's host`);
    // The functions verify the mailbox's TLS certificate by host name; an address cannot be checked.
    if (/^[\d.]+$|:/.test(mailboxHost))
      throw new Error(
        `context mailboxHost must be the mailbox's DNS name (the one its TLS certificate names), not an IP address: ${mailboxHost}`,
      );
  });
  check(() => {
    if (!mailboxSecretArn) throw new Error(`context mailboxSecretArn is required (stage ${stage}): the mailbox secret's complete ARN`);
    if (!SECRET_ARN.test(mailboxSecretArn))
      throw new Error(`context mailboxSecretArn must be a complete secret ARN (ending in -XXXXXX), got ${mailboxSecretArn}`);
  });
  const alarmEmail = str(node, 'alarmEmail');
  check(() => {
    // 36 alarms that tell nobody are no alarms: prod needs someone to tell.
    if (stage === 'prod' && !alarmEmail)
      throw new Error('context alarmEmail is required (stage prod): the address the alarms notify (e.g. the on-call list)');
  });
  const site: Record<string, string | undefined> = {
    mailboxHost,
    mailboxSecretArn,
    mailboxSecurityGroupId: str(node, 'mailboxSecurityGroupId'),
    account: str(node, 'account'),
    alarmEmail,
    jwtIssuer,
    authorizerFunctionArn,
    txCheckAllowedOrigins: str(node, 'txCheckAllowedOrigins'),
  };
  for (const [key, value] of Object.entries(site)) check(() => refusePlaceholder(key, value));
  return site;
}

function checkOperators(at: string, principals: unknown): void {
  if (!Array.isArray(principals))
    throw new Error(`${at}.operatorPrincipals must be a list of IAM role ARNs, got ${JSON.stringify(principals)}`);
  for (const p of principals) {
    if (typeof p !== 'string' || !OPERATOR_ROLE_ARN.test(p))
      throw new Error(`${at}.operatorPrincipals must hold IAM role ARNs (arn:aws:iam::<account>:role/<name>), got ${JSON.stringify(p)}`);
    refusePlaceholder(`${at}.operatorPrincipals`, p);
  }
}

/** Set by the stack from its resources and site settings, never per stage: where each comes from. */
const FROM_STACK: Record<string, string> = {
  MSGX_RUNTIME: 'always lambda in the cloud',
  MSGX_PG_URL: "assembled from the database's secret",
  MSGX_MAILBOX_URL: 'assembled from context mailboxHost and mailboxSecretArn',
  MSGX_MAILBOX_SSL_CA: "the runtime's RDS CA bundle",
  MSGX_KAFKA_BROKERS: "the cluster's IAM bootstrap brokers",
  MSGX_KAFKA_SSL: 'always on with MSK IAM',
  MSGX_KAFKA_IAM_REGION: "the stack's region",
  MSGX_SIGNING_SECRET: 'read from the signing secret',
  MSGX_OPERATOR_PRINCIPALS: "the stage's operatorPrincipals",
  MSGX_STAGE: "the stage's name, which the transactional-id grant names",
};

function splitList(v: string | undefined): string[] {
  return (v ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
}

/**
 * The msgx settings every function gets: the site's context keys (timezone, topics, check-back
 * origins) with the stage's `env` over them, checked by the functions' own schema
 * (lib/config/config.ts), each problem naming where the value was set.
 */
function readFunctionEnv(
  at: string,
  stageEnv: Record<string, unknown>,
  fromContext: Record<string, string | undefined>,
  problems: string[],
): Record<string, string> {
  const contextKey: Record<string, string> = {
    MSGX_TIMEZONE: 'timezone',
    MSGX_TOPIC_MSG: 'topicMsg',
    MSGX_TOPIC_SCHD: 'topicSchd',
    MSGX_TOPIC_PARTITIONS: 'topicPartitions',
    MSGX_TX_CHECK_ALLOWED_ORIGINS: 'txCheckAllowedOrigins',
    MSGX_TX_TOPICS: 'txTopics',
  };
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(fromContext)) if (v !== undefined) env[k] = v;
  if (!isObject(stageEnv)) {
    problems.push(`${at}.env must be an object of MSGX_* settings, got ${JSON.stringify(stageEnv)}`);
    return env;
  }
  for (const [k, v] of Object.entries(stageEnv)) {
    if (!SETTING_NAMES.includes(k)) problems.push(`${at}.env.${k} is not a msgx setting (README "Configuration" lists them)`);
    else if (TWIN_ONLY_SETTINGS.includes(k)) problems.push(`${at}.env.${k} is read by the twin only; a cloud function ignores it`);
    else if (FROM_STACK[k]) problems.push(`${at}.env.${k} is set by the stack (${FROM_STACK[k]})`);
    else if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')
      problems.push(`${at}.env.${k} must be a string, number or boolean, got ${JSON.stringify(v)}`);
    else env[k] = String(v);
  }
  const where = (name: string) =>
    name in stageEnv ? `${at}.env.${name}` : contextKey[name] ? `context ${contextKey[name]} (${name})` : name;
  for (const line of settingProblems(env)) {
    const name = line.slice(0, line.indexOf(':'));
    problems.push(`${where(name)}${line.slice(name.length)}`);
  }
  // Transactional messages are on once check-back has origins; the dispatcher's topic grant is
  // exactly MSGX_TX_TOPICS, so the cloud needs the list (the twin may leave it open).
  if (env.MSGX_TX_CHECK_ALLOWED_ORIGINS && splitList(env.MSGX_TX_TOPICS).length === 0)
    problems.push(
      `${at}.env.MSGX_TX_TOPICS (or context txTopics) is required when transactional messages are enabled (context txCheckAllowedOrigins is set): the topics producers may name, the only ones besides msgx's the dispatcher may write`,
    );
  return env;
}

function checkKafka(at: string, settings: StageSettings): void {
  const k = settings.kafka;
  if (settings.existing.msk) return;
  if (k.brokers % settings.azs !== 0)
    throw new Error(`${at}.kafka.brokers must be a multiple of ${at}.azs (${settings.azs}), got ${k.brokers}`);
  if (k.replicationFactor < 1 || k.replicationFactor > k.brokers)
    throw new Error(`${at}.kafka.replicationFactor must be 1..brokers (${k.brokers}), got ${k.replicationFactor}`);
  // min ISR = RF would stop every write while one broker is patched.
  if (k.minInsyncReplicas < 1 || (k.replicationFactor > 1 && k.minInsyncReplicas >= k.replicationFactor))
    throw new Error(`${at}.kafka.minInsyncReplicas must be 1..replicationFactor-1, got ${k.minInsyncReplicas}`);
  if (k.maxVolumeGb !== 0 && k.maxVolumeGb <= k.volumeGb)
    throw new Error(`${at}.kafka.maxVolumeGb must exceed volumeGb (${k.volumeGb}) or be 0 (no autoscaling), got ${k.maxVolumeGb}`);
}

function checkExisting(at: string, e: ExistingSettings): void {
  const need = (key: string, ok: boolean, what: string, got: unknown) => {
    if (!ok) throw new Error(`${at}.existing.${key} must be ${what}, got ${JSON.stringify(got)}`);
  };
  if (e.vpc) {
    const v = e.vpc;
    need('vpc.id', /^vpc-[0-9a-f]+$/.test(String(v.id)), 'a VPC id (vpc-…)', v.id);
    need('vpc.cidr', /^\d+\.\d+\.\d+\.\d+\/\d+$/.test(String(v.cidr)), 'the VPC CIDR', v.cidr);
    need(
      'vpc.availabilityZones',
      Array.isArray(v.availabilityZones) && v.availabilityZones.length >= 2,
      'two or more AZ names',
      v.availabilityZones,
    );
    for (const key of ['appSubnetIds', 'dataSubnetIds'] as const) {
      const ids = v[key];
      if (ids === undefined && key === 'dataSubnetIds') continue;
      need(`vpc.${key}`, Array.isArray(ids) && ids.every((i) => /^subnet-[0-9a-f]+$/.test(i)), 'a list of subnet ids', ids);
      need(`vpc.${key}`, ids!.length === v.availabilityZones.length, `one subnet per AZ (${v.availabilityZones.length})`, ids);
    }
  }
  if (e.postgres) {
    const p = e.postgres;
    need('postgres.endpoint', typeof p.endpoint === 'string' && p.endpoint.length > 0, 'a host name', p.endpoint);
    need('postgres.secretArn', SECRET_ARN.test(String(p.secretArn)), 'a complete secret ARN (ending in -XXXXXX)', p.secretArn);
    need('postgres.securityGroupId', /^sg-[0-9a-f]+$/.test(String(p.securityGroupId)), 'a security group id', p.securityGroupId);
  }
  if (e.msk) {
    const m = e.msk;
    need('msk.clusterArn', MSK_ARN.test(String(m.clusterArn)), 'an MSK cluster ARN (arn:…:kafka:…:cluster/<name>/<uuid>)', m.clusterArn);
    need(
      'msk.bootstrapBrokers',
      /^[^,\s]+:9098(,[^,\s]+:9098)*$/.test(String(m.bootstrapBrokers)),
      'the IAM bootstrap string (host:9098,…)',
      m.bootstrapBrokers,
    );
    if (m.securityGroupId !== undefined)
      need('msk.securityGroupId', /^sg-[0-9a-f]+$/.test(String(m.securityGroupId)), 'a security group id', m.securityGroupId);
  }
  if (e.postgres && !e.vpc) throw new Error(`${at}.existing.postgres needs ${at}.existing.vpc (the database's network)`);
  if (e.msk && !e.vpc) throw new Error(`${at}.existing.msk needs ${at}.existing.vpc (the cluster's network)`);
}

/**
 * Stages of cdk.json that use the same existing MSK cluster must not write each other's topics:
 * the dispatcher's grant is its stage's topic names, so two stages on `msgx.msg` could each write
 * the other's. Each such stage names its own (stages.<stage>.env.MSGX_TOPIC_MSG / MSGX_TOPIC_SCHD).
 */
/** MSGX_TOPIC_OFFSETS's default (lib/config/config.ts; test/infra/exactly-once-grants.test.ts holds them together). */
export const DEFAULT_OFFSETS_TOPIC = 'msgx.offsets';

function checkSharedCluster(
  at: string,
  stage: string,
  clusterArn: string | undefined,
  stages: unknown,
  env: Record<string, string>,
  context: { msg: string; schd: string },
): void {
  // A malformed ARN is reported by checkExisting.
  if (!clusterArn || !MSK_ARN.test(clusterArn) || !isObject(stages)) return;
  // The offsets topic too: its cursors are keyed by target, so two stages on one would mix them.
  const mine = [env.MSGX_TOPIC_MSG ?? context.msg, env.MSGX_TOPIC_SCHD ?? context.schd, env.MSGX_TOPIC_OFFSETS ?? DEFAULT_OFFSETS_TOPIC];
  for (const [other, block] of Object.entries(stages)) {
    if (other === stage || !isObject(block)) continue;
    const existing = isObject(block.existing) ? block.existing : {};
    if (!isObject(existing.msk) || existing.msk.clusterArn !== clusterArn) continue;
    const theirEnv = isObject(block.env) ? block.env : {};
    const theirs = [
      String(theirEnv.MSGX_TOPIC_MSG ?? context.msg),
      String(theirEnv.MSGX_TOPIC_SCHD ?? context.schd),
      String(theirEnv.MSGX_TOPIC_OFFSETS ?? DEFAULT_OFFSETS_TOPIC),
    ];
    const shared = mine.filter((t) => theirs.includes(t));
    if (shared.length > 0)
      throw new Error(
        `${at}.env.MSGX_TOPIC_MSG, MSGX_TOPIC_SCHD and MSGX_TOPIC_OFFSETS: stage ${other} uses the same MSK cluster (${clusterNameOf(clusterArn)}) and the same topic${shared.length > 1 ? 's' : ''} ${shared.join(', ')}, so each could write the other's; give every stage on the cluster its own, e.g. msgx.${stage}.msg, msgx.${stage}.schd and msgx.${stage}.offsets`,
      );
  }
}

/** The name of an MSK cluster from its ARN. */
export function clusterNameOf(arn: string): string {
  const m = MSK_ARN.exec(arn);
  if (!m) throw new Error(`not an MSK cluster ARN: ${arn}`);
  return m[1]!;
}

function* flatten(prefix: string, v: unknown): Generator<[string, string]> {
  if (typeof v === 'string') yield [prefix, v];
  else if (Array.isArray(v)) for (const [i, x] of v.entries()) yield* flatten(`${prefix}[${i}]`, x);
  else if (isObject(v)) for (const [k, x] of Object.entries(v)) yield* flatten(`${prefix}.${k}`, x);
}
