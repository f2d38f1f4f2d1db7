import { cpSync, existsSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Annotations, Duration, RemovalPolicy, Stack, Stage, Token, Validations } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct, type IConstruct } from 'constructs';
import type { BundlingMode, FunctionRole, LambdaRuntime } from '../config.ts';
import { topicArnOf } from '../stacks/messaging-stack.ts';
import { acknowledge } from '../nag.ts';
import { cursorGroupPrefix, stagePrefix } from '../../lib/constants.ts';
import { bundleConsoleSync, bundleFunctionSync, functionEntry } from '../bundle.ts';

const RUNTIMES: Record<LambdaRuntime, lambda.Runtime> = {
  'nodejs20.x': lambda.Runtime.NODEJS_20_X,
  'nodejs22.x': lambda.Runtime.NODEJS_22_X,
  'nodejs24.x': lambda.Runtime.NODEJS_24_X,
};

/** The RDS CA bundle the Node.js runtimes ship (docs: "Using TLS with RDS from Lambda"). */
export const RDS_CA_BUNDLE = '/var/runtime/ca-cert.pem';

/**
 * The AWS Parameters and Secrets Lambda Extension: the functions read their secrets at cold start
 * from it over localhost (lib/config/secrets.ts) instead of importing the AWS SDK client (~120 ms
 * of the cold start). Cached for at most 5 minutes; the re-read after a refused login (rotation)
 * bypasses it and asks Secrets Manager through the SDK. The layer ARN is a per-region mapping.
 */
const SECRETS_EXTENSION = lambda.ParamsAndSecretsLayerVersion.fromVersion(lambda.ParamsAndSecretsVersions.V1_0_103, {
  cacheEnabled: true,
  secretsManagerTtl: Duration.seconds(300),
  // Our client waits 3 s, then reads through the SDK itself.
  secretsManagerTimeout: Duration.seconds(2),
  logLevel: lambda.ParamsAndSecretsLogLevel.WARN,
});

/** The alias that callers invoke; it moves to a new version only after the migration. */
export const LIVE_ALIAS = 'live';

/** Folder of the bundle inside the Lambda (`/var/task`); migrations are copied beside it. */
const TASK_ROOT = '/var/task';

/**
 * One function's bundle in `dir` (emptied first): its entry's code by infra-cdk/bundle.ts (the
 * same definition `npm run bench` measures), and the files only that function reads at run time —
 * the migrations for migrate; for the ingress the console's static files and app.js built from its
 * TypeScript (lib/http/consoleRoutes.ts serves ./console/ beside the running module: no sources,
 * no esbuild).
 */
function bundleRole(repoRoot: string, role: FunctionRole, dir: string, target: string): void {
  rmSync(dir, { recursive: true, force: true });
  bundleFunctionSync({ repoRoot, fn: role, outdir: dir, target, sourcemap: true });
  if (role === 'migrate') cpSync(join(repoRoot, 'migrations'), join(dir, 'migrations'), { recursive: true });
  if (role === 'ingress') bundleConsoleSync(repoRoot, join(dir, 'console'));
}

export interface MsgxFunctionProps {
  role: FunctionRole;
  /**
   * Repository root: the entry is `functions/<role>.ts`; `migrations/` is copied into the bundle.
   */
  repoRoot: string;
  bundling: BundlingMode;
  runtime: LambdaRuntime;
  /** Attach the Parameters and Secrets Lambda Extension (see SECRETS_EXTENSION). Default true. */
  secretsExtension?: boolean;
  vpc: ec2.IVpc;
  securityGroups: ec2.ISecurityGroup[];
  subnets: ec2.SubnetSelection;
  memoryMb: number;
  timeout: Duration;
  logRetentionDays: number;
  /** What a stack deletion does to the log group (prod keeps it). Default DESTROY. */
  logRemovalPolicy?: RemovalPolicy;
  reservedConcurrency?: number;
  /** Async invokes (schedules, the ingress kick): drop rather than queue a stale run. */
  asyncMaxEventAge?: Duration;
  environment: Record<string, string>;
  description: string;
}

export interface PostgresBinding {
  secret: secretsmanager.ISecret;
  host: string;
  port: string;
  database: string;
}

export interface MailboxBinding {
  secret: secretsmanager.ISecret;
  host: string;
  port: number;
  database: string;
}

export interface KafkaBinding {
  clusterArn: string;
  clusterName: string;
  bootstrapBrokers: string;
  /** Topics written to, exact names (ARN bound to this cluster's UUID): msgx's and MSGX_TX_TOPICS. */
  writeTopics?: string[];
  /**
   * Exactly once into Kafka (docs/outbox.md): the stage, set as MSGX_STAGE, whose transactional ids
   * and cursor groups (lib/constants.ts) are granted by prefix, so a writer may fence
   * only its own stage's producers on a shared cluster; and the offsets topics it reads its cursors
   * back from (it writes them too: they belong in writeTopics).
   */
  exactlyOnce?: { stage: string; offsetsTopics: string[] };
  /** Topics created and configured (the migrate function). */
  adminTopics?: string[];
}

/**
 * The one construct every msgx function is built with: Node 22 on ARM64, ESM bundle by esbuild
 * with the migrations beside it, X-Ray tracing, its own log group with retention, VPC placement.
 * The `bind…()` helpers grant the IAM permission and set the environment variable together, so a
 * function can never hold a setting it is not allowed to use (or the reverse).
 */
export class MsgxFunction extends Construct {
  readonly fn: lambda.Function;
  readonly role: FunctionRole;
  readonly logGroup: logs.LogGroup;
  /** True when the real entry was bundled; false when a placeholder stands in (tests, missing file). */
  readonly bundled: boolean;
  /** The alias every caller invokes (LIVE_ALIAS), once publishLive() made it. */
  live?: lambda.Alias;
  private readonly asyncMaxEventAge?: Duration;

  constructor(scope: Construct, id: string, props: MsgxFunctionProps) {
    super(scope, id);
    this.role = props.role;
    this.asyncMaxEventAge = props.asyncMaxEventAge;
    const entry = functionEntry(props.repoRoot, props.role).file;
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetentionDays,
      removalPolicy: props.logRemovalPolicy ?? RemovalPolicy.DESTROY,
    });
    const common: Omit<lambda.FunctionProps, 'code' | 'handler'> = {
      runtime: RUNTIMES[props.runtime],
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memoryMb,
      timeout: props.timeout,
      tracing: lambda.Tracing.ACTIVE,
      logGroup: this.logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      vpc: props.vpc,
      vpcSubnets: props.subnets,
      securityGroups: props.securityGroups,
      reservedConcurrentExecutions: props.reservedConcurrency,
      paramsAndSecrets: props.secretsExtension === false ? undefined : SECRETS_EXTENSION,
      description: props.description,
      environment: {
        ...props.environment,
        MSGX_RUNTIME: 'lambda',
        ...(props.role === 'migrate' ? { MSGX_MIGRATIONS_DIR: `${TASK_ROOT}/migrations` } : {}),
        POWERTOOLS_SERVICE_NAME: 'msgx',
        POWERTOOLS_METRICS_NAMESPACE: 'msgx',
        // Node 20+ runtimes ship the RDS CA bundle here but do not load it unless asked; the
        // database clients verify the server against it (sslmode=verify-full, MySQL ssl.ca).
        NODE_EXTRA_CA_CERTS: RDS_CA_BUNDLE,
        MSGX_PG_SSL_CA: RDS_CA_BUNDLE,
        NODE_OPTIONS: '--enable-source-maps',
      },
    };

    const wantBundle = props.bundling === 'esbuild';
    this.bundled = wantBundle && existsSync(entry);
    if (wantBundle && !this.bundled) {
      const msg = `${relative(props.repoRoot, entry)} not found: ${props.role} deployed as a placeholder that fails every call`;
      Annotations.of(this).addWarningV2('msgx:placeholder-function', msg);
      console.warn(`[msgx] warning: ${msg}`);
    }

    if (this.bundled) {
      const target = props.runtime.replace('nodejs', 'node').replace('.x', '');
      // Bundled before CDK sees it, into a folder of its own: the asset is that folder, hashed by
      // its content. (A `bundling.local.tryBundle` hook cannot tell functions apart: CDK's asset
      // cache keys bundling options by their JSON, which drops the function, so every function
      // would get the first one's bundle.)
      const dir = join(Stage.of(this)!.outdir, '.msgx-bundles', props.role);
      bundleRole(props.repoRoot, props.role, dir, target);
      const code = lambda.Code.fromAsset(dir);
      this.fn = new lambda.Function(this, 'Fn', { ...common, handler: 'index.handler', code });
    } else {
      this.fn = new lambda.Function(this, 'Fn', {
        ...common,
        handler: 'index.handler',
        code: lambda.Code.fromInline(
          `exports.handler = async () => { throw new Error('msgx ${props.role}: placeholder, function was not bundled'); };`,
        ),
      });
    }

    acknowledge(this.fn, [
      {
        id: 'AwsSolutions-IAM4',
        reason: 'AWSLambdaBasicExecutionRole/AWSLambdaVPCAccessExecutionRole are the minimal AWS policies for logs and VPC ENIs.',
        appliesTo: [
          'Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole',
          'Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole',
        ],
      },
      {
        id: 'AwsSolutions-IAM5',
        reason: 'X-Ray PutTraceSegments/PutTelemetryRecords do not support resource-level permissions.',
        appliesTo: ['Resource::*'],
      },
    ]);
    if (props.runtime !== 'nodejs24.x') {
      const why = `msgx runs on ${props.runtime} (context lambdaRuntime; nodejs22.x is supported by AWS until 2027-04-30); switch with -c lambdaRuntime=nodejs24.x once verified.`;
      acknowledge(this.fn, [{ id: 'AwsSolutions-L1', reason: why }]);
      // CDK's own CloudFormation validation warns about the Node 20 deprecation calendar.
      if (props.runtime === 'nodejs20.x') Validations.of(this.fn).acknowledge({ id: 'CloudFormation-Validate::W2531', reason: why });
    }
  }

  get functionName(): string {
    return this.fn.functionName;
  }

  /**
   * Publishes the function's code as a version and points the `live` alias at it, both only after
   * `after` (the migration trigger) succeeded. Every caller — the API, the schedules, the
   * ingress's kick — invokes the alias, never $LATEST: CloudFormation updates the function's code
   * first, but new code serves only once its migration went through, and a failed migration rolls
   * back with the old version still live. Versions are kept (CDK's default for currentVersion), so
   * the alias can be pointed back (docs/deploy.md). Async invokes of the alias are dropped after
   * `asyncMaxEventAge` rather than queued.
   */
  publishLive(after: IConstruct): lambda.Alias {
    const version = this.fn.currentVersion;
    version.node.addDependency(after);
    this.live = new lambda.Alias(this, 'Live', {
      aliasName: LIVE_ALIAS,
      version,
      description: `msgx ${this.role}: the version callers invoke, moved after the migration`,
      maxEventAge: this.asyncMaxEventAge,
      retryAttempts: this.asyncMaxEventAge ? 0 : undefined,
    });
    this.live.node.addDependency(after);
    return this.live;
  }

  /** The alias; a function without one is never invoked by another resource. */
  private liveAlias(): lambda.Alias {
    if (!this.live) throw new Error(`msgx ${this.role}: publishLive() first, callers invoke the live alias`);
    return this.live;
  }

  env(name: string, value: string): this {
    this.fn.addEnvironment(name, value);
    return this;
  }

  /** msgx's PostgreSQL: read its secret; the function assembles MSGX_PG_URL at cold start. */
  bindPostgres(pg: PostgresBinding): this {
    pg.secret.grantRead(this.fn);
    return this.env('MSGX_PG_SECRET_ARN', pg.secret.secretArn)
      .env('MSGX_PG_HOST', pg.host)
      .env('MSGX_PG_PORT', pg.port)
      .env('MSGX_PG_DB', pg.database);
  }

  /** The shared MySQL mailbox: read its (imported) secret; MSGX_MAILBOX_URL is assembled at cold start. */
  bindMailbox(mb: MailboxBinding): this {
    mb.secret.grantRead(this.fn);
    return this.env('MSGX_MAILBOX_SECRET_ARN', mb.secret.secretArn)
      .env('MSGX_MAILBOX_SSL_CA', RDS_CA_BUNDLE)
      .env('MSGX_MAILBOX_HOST', mb.host)
      .env('MSGX_MAILBOX_PORT', String(mb.port))
      .env('MSGX_MAILBOX_DB', mb.database);
  }

  /** Migrate only: the secret of the functions' user, created by the migration if missing. */
  bindPostgresAppUser(secret: secretsmanager.ISecret): this {
    secret.grantRead(this.fn);
    return this.env('MSGX_PG_APP_SECRET_ARN', secret.secretArn);
  }

  /** The HMAC key for msgx-signature (check-back, webhooks). */
  bindSigningSecret(secret: secretsmanager.ISecret): this {
    secret.grantRead(this.fn);
    return this.env('MSGX_SIGNING_SECRET_ARN', secret.secretArn);
  }

  /** MSK with IAM auth: connect to this cluster only, and touch only the named topics. */
  bindKafka(k: KafkaBinding): this {
    const stack = Stack.of(this);
    const writes = (k.writeTopics ?? []).length > 0;
    const clusterActions = ['kafka-cluster:Connect', 'kafka-cluster:DescribeCluster'];
    if (writes) clusterActions.push('kafka-cluster:WriteDataIdempotently');
    this.fn.addToRolePolicy(new iam.PolicyStatement({ actions: clusterActions, resources: [k.clusterArn] }));
    if (k.writeTopics?.length) {
      this.fn.addToRolePolicy(
        new iam.PolicyStatement({
          actions: ['kafka-cluster:DescribeTopic', 'kafka-cluster:WriteData'],
          resources: k.writeTopics.map((t) => topicArnOf(stack, k.clusterArn, t)),
        }),
      );
    }
    if (k.exactlyOnce) {
      const { stage, offsetsTopics } = k.exactlyOnce;
      // Named by the cluster's name (the UUID a wildcard): a literal ARN that cdk-nag can be told
      // about, and only one cluster of a name exists in a region at a time.
      const ids = `transactional-id/${k.clusterName}/*/${stagePrefix(stage)}*`;
      const groups = `group/${k.clusterName}/*/${cursorGroupPrefix(stage)}*`;
      const arn = (tail: string) => `arn:${stack.partition}:kafka:${stack.region}:${stack.account}:${tail}`;
      this.fn.addToRolePolicy(
        new iam.PolicyStatement({
          actions: ['kafka-cluster:DescribeTransactionalId', 'kafka-cluster:AlterTransactionalId'],
          resources: [arn(ids)],
        }),
      );
      // The cursor is read back at start through a consumer group of its own (joining one is
      // AlterGroup, which needs DescribeGroup); ReadData needs DescribeTopic and AlterGroup.
      this.fn.addToRolePolicy(
        new iam.PolicyStatement({ actions: ['kafka-cluster:DescribeGroup', 'kafka-cluster:AlterGroup'], resources: [arn(groups)] }),
      );
      this.fn.addToRolePolicy(
        new iam.PolicyStatement({
          actions: ['kafka-cluster:DescribeTopic', 'kafka-cluster:ReadData'],
          resources: offsetsTopics.map((t) => topicArnOf(stack, k.clusterArn, t)),
        }),
      );
      const shown = (v: string, pseudo: string) => (Token.isUnresolved(v) ? `<AWS::${pseudo}>` : v);
      const nagArn = (tail: string) =>
        `Resource::arn:${shown(stack.partition, 'Partition')}:kafka:${shown(stack.region, 'Region')}:${shown(stack.account, 'AccountId')}:${tail}`;
      acknowledge(this.fn, [
        {
          id: 'AwsSolutions-IAM5',
          reason:
            "Transactional ids and the start-up cursor reader's consumer group are named per target and per process start at run time; the grant is the stage's prefix on this cluster only.",
          appliesTo: [nagArn(ids), nagArn(groups)],
        },
      ]);
      this.env('MSGX_STAGE', stage);
    }
    if (k.adminTopics?.length) {
      this.fn.addToRolePolicy(
        new iam.PolicyStatement({
          actions: [
            'kafka-cluster:CreateTopic',
            'kafka-cluster:DescribeTopic',
            'kafka-cluster:AlterTopic',
            'kafka-cluster:DescribeTopicDynamicConfiguration',
            'kafka-cluster:AlterTopicDynamicConfiguration',
          ],
          resources: k.adminTopics.map((t) => topicArnOf(stack, k.clusterArn, t)),
        }),
      );
    }
    return this.env('MSGX_KAFKA_BROKERS', k.bootstrapBrokers).env('MSGX_KAFKA_SSL', '1').env('MSGX_KAFKA_IAM_REGION', stack.region);
  }

  /**
   * Let this function start its own live alias (the handover to its successor). A separate policy:
   * the function's default policy naming its own alias would be a dependency cycle. The function
   * finds the ARN in its invocation context, so no environment variable is needed.
   */
  allowSelfInvoke(): this {
    const alias = this.liveAlias();
    new iam.Policy(this, 'SelfInvoke', {
      roles: [this.fn.role!],
      statements: [new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [alias.functionArn] })],
    });
    return this;
  }

  /** Let this function start `target`'s live alias asynchronously (the ingress kicking the pump). */
  bindInvoke(target: MsgxFunction, envName: string): this {
    const alias = target.liveAlias();
    this.fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [alias.functionArn] }));
    // Lambda's Invoke takes the alias's ARN as FunctionName.
    return this.env(envName, alias.functionArn);
  }
}
