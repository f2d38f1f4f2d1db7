import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import type * as iam from 'aws-cdk-lib/aws-iam';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { buildMsgx, type MsgxStacks } from '../../infra-cdk/build.ts';
import { SCHEDULED_ROLES, type FunctionRole, type ScheduledRole } from '../../infra-cdk/config.ts';
import { ROLE_CATALOGUE } from '../../lib/app/catalogue.ts';
import { CDK_CONTEXT, MAILBOX_SECRET_ARN, synth } from './synth.ts';

// Synthesizing five stacks takes seconds alone and minutes on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

/**
 * The kinds the application emits DeadCount for (lib/observability/metrics.ts: dead messages, events and
 * transactional messages), written by hand: an alarm the stack forgets must fail this test.
 */
const EXPECTED_DEAD_KINDS = ['event', 'proc', 'txmsg'];

/**
 * The scheduled roles as they are, written out: a change to one of them must fail here. A role
 * added to the catalogue (lib/app/catalogue.ts) is checked against its own entry instead: a
 * function, a schedule at its rate, the grants its `uses` names and nothing else, its alarms.
 */
const KNOWN_SCHEDULED = ['poller', 'pump', 'dispatcher', 'sweep'];
const ADDED = SCHEDULED_ROLES.filter((r) => !KNOWN_SCHEDULED.includes(r));
/** ingress, the four, migrate, and any role added to the catalogue. */
const FUNCTION_COUNT = 6 + ADDED.length;
const uses = (role: ScheduledRole, what: string) => (ROLE_CATALOGUE[role].uses as readonly string[]).includes(what);
const rate = (role: ScheduledRole) => {
  const n = ROLE_CATALOGUE[role].everyMinutes;
  return n === 1 ? 'rate(1 minute)' : `rate(${n} minutes)`;
};

type Statement = { Action: string | string[]; Resource: unknown; Effect: string; Condition?: unknown };

/** Every statement of every inline policy attached to `role`. */
function statementsOf(template: Template, stack: Stack, role: iam.IRole): Statement[] {
  const roleId = stack.getLogicalId(role.node.defaultChild as never);
  const policies = template.findResources('AWS::IAM::Policy');
  const out: Statement[] = [];
  for (const p of Object.values(policies)) {
    const roles = (p.Properties.Roles ?? []) as { Ref: string }[];
    if (roles.some((r) => r.Ref === roleId)) out.push(...(p.Properties.PolicyDocument.Statement as Statement[]));
  }
  return out;
}

const actions = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
const resources = (s: Statement): unknown[] => (Array.isArray(s.Resource) ? s.Resource : [s.Resource]);
const withAction = (ss: Statement[], prefix: string) => ss.filter((s) => actions(s).some((a) => a.startsWith(prefix)));

describe('msgx stacks (dev)', () => {
  let s: MsgxStacks;
  let service: Template;
  /** The logical id of a function's live alias. */
  let aliasId: (role: FunctionRole) => string;
  beforeAll(() => {
    s = synth();
    service = Template.fromStack(s.service);
    aliasId = (role) => s.service.getLogicalId(s.service.functions[role].live!.node.defaultChild as never);
  });

  it('builds a VPC with endpoints for Secrets Manager, Lambda and Logs (no Scheduler, no STS: no function calls them)', () => {
    const t = Template.fromStack(s.network);
    t.resourceCountIs('AWS::EC2::VPC', 1);
    t.resourceCountIs('AWS::EC2::FlowLog', 1);
    const services = Object.values(t.findResources('AWS::EC2::VPCEndpoint')).map((e) => JSON.stringify(e.Properties.ServiceName));
    expect(services).toHaveLength(4);
    for (const name of ['.secretsmanager', '.lambda', '.logs', '.s3'])
      expect(
        services.some((x) => x.includes(name)),
        name,
      ).toBe(true);
  });

  it('runs PostgreSQL 16, encrypted, backed up, with a rotated secret and keepalives for advisory locks', () => {
    const t = Template.fromStack(s.data);
    t.hasResourceProperties('AWS::RDS::DBInstance', {
      Engine: 'postgres',
      EngineVersion: Match.stringLikeRegexp('^16'),
      StorageEncrypted: true,
      BackupRetentionPeriod: 3,
      DeletionProtection: false,
      PubliclyAccessible: false,
    });
    // The admin user rotates alone; the functions' user alternates (msgx_app / msgx_app_clone).
    t.resourceCountIs('AWS::SecretsManager::RotationSchedule', 2);
    t.hasResourceProperties('AWS::SecretsManager::Secret', { Name: 'msgx/dev/postgres-app' });
    t.hasResourceProperties('AWS::RDS::DBParameterGroup', {
      Parameters: Match.objectLike({ tcp_keepalives_idle: '10', 'rds.force_ssl': '1' }),
    });
    // Only the functions' group may reach the database.
    t.hasResourceProperties('AWS::EC2::SecurityGroupIngress', { FromPort: 5432, ToPort: 5432 });
  });

  it('runs MSK on Kafka 3.9.x with IAM auth only and TLS', () => {
    const t = Template.fromStack(s.messaging);
    t.hasResourceProperties('AWS::MSK::Cluster', {
      KafkaVersion: '3.9.x',
      ClientAuthentication: { Sasl: { Iam: { Enabled: true } }, Unauthenticated: { Enabled: false } },
      EncryptionInfo: { EncryptionInTransit: { ClientBroker: 'TLS', InCluster: true } },
    });
  });

  it('builds every function the same way: Node 22, ARM64, X-Ray, VPC, log retention', () => {
    const fns = service.findResources('AWS::Lambda::Function', {
      Properties: { Description: Match.stringLikeRegexp('^msgx ') },
    });
    expect(Object.keys(fns)).toHaveLength(FUNCTION_COUNT);
    for (const f of Object.values(fns)) {
      expect(f.Properties.Runtime).toBe('nodejs22.x');
      expect(f.Properties.Architectures).toEqual(['arm64']);
      expect(f.Properties.TracingConfig).toEqual({ Mode: 'Active' });
      expect(f.Properties.VpcConfig).toBeDefined();
      expect(f.Properties.Environment.Variables.MSGX_RUNTIME).toBe('lambda');
      expect(f.Properties.Environment.Variables.MSGX_PG_SECRET_ARN).toBeDefined();
      // Secrets at cold start from the Parameters and Secrets extension (lib/config/secrets.ts reads
      // its port from this variable), the layer's ARN looked up per region at deploy time.
      expect(f.Properties.Environment.Variables.PARAMETERS_SECRETS_EXTENSION_HTTP_PORT).toBe('2773');
      expect(f.Properties.Environment.Variables.SECRETS_MANAGER_TTL).toBe('300');
      expect(f.Properties.Layers).toHaveLength(1);
      expect(f.Properties.Layers[0]['Fn::FindInMap']).toContainEqual({ Ref: 'AWS::Region' });
    }
    // One log group per function plus the API access log, all on the stage's retention.
    service.resourcePropertiesCountIs('AWS::Logs::LogGroup', { RetentionInDays: 14 }, FUNCTION_COUNT + 1);
  });

  it('gives scheduled functions a 60-90 s timeout and no reserved concurrency, the ingress <= 29 s and its connection budget', () => {
    const props = (role: FunctionRole) =>
      service.toJSON().Resources[s.service.getLogicalId(s.service.functions[role].fn.node.defaultChild as never)].Properties;
    for (const role of SCHEDULED_ROLES) {
      expect(props(role).Timeout).toBeGreaterThanOrEqual(60);
      expect(props(role).Timeout).toBeLessThanOrEqual(90);
    }
    expect(props('ingress').Timeout).toBeLessThanOrEqual(29);
    // The advisory lock is the guard; a reservation could be refused in a small account.
    for (const role of SCHEDULED_ROLES) expect(props(role).ReservedConcurrentExecutions, role).toBeUndefined();
    expect(props('migrate').ReservedConcurrentExecutions).toBeUndefined();
    // t4g.micro: RDS's 112 connections less 27 set aside, in pools of 3 (test/infra/connections.test.ts).
    expect(props('ingress').ReservedConcurrentExecutions).toBe(28);
    // Async invokes (schedules, the ingress kick) are dropped after a minute, never queued for hours.
    service.resourcePropertiesCountIs(
      'AWS::Lambda::EventInvokeConfig',
      { MaximumEventAgeInSeconds: 60, MaximumRetryAttempts: 0 },
      4 + ADDED.length,
    );
  });

  it('schedules poller, pump, dispatcher and sweep once a minute in one group', () => {
    service.resourceCountIs('AWS::Scheduler::ScheduleGroup', 1);
    const schedules = service.findResources('AWS::Scheduler::Schedule');
    expect(Object.keys(schedules)).toHaveLength(4 + ADDED.length);
    const targets = Object.values(schedules).map((x) => {
      const role = String(x.Properties.Name).replace('msgx-dev-', '') as ScheduledRole;
      expect(x.Properties.ScheduleExpression, role).toBe(KNOWN_SCHEDULED.includes(role) ? 'rate(1 minute)' : rate(role));
      expect(x.Properties.GroupName).toBe('msgx-dev');
      return x.Properties.Target.Arn.Ref;
    });
    // Each its function's live alias, never $LATEST.
    expect(targets.sort()).toEqual(SCHEDULED_ROLES.map(aliasId).sort());
  });

  it('lets the scheduler role invoke exactly the four scheduled functions and nothing else', () => {
    const ss = statementsOf(service, s.service, s.service.schedulerRole);
    expect(ss.flatMap(actions)).toEqual(['lambda:InvokeFunction']);
    const arns = ss.flatMap(resources).map((r) => (r as { Ref: string }).Ref);
    expect(arns.sort()).toEqual(SCHEDULED_ROLES.map(aliasId).sort());
  });

  it("lets the ingress invoke only the pump's, the poller's and the dispatcher's live alias, a looping role only its own", () => {
    const pumpId = aliasId('pump');
    const pollerId = aliasId('poller');
    const dispatcherId = aliasId('dispatcher');
    for (const [role, f] of Object.entries(s.service.functions)) {
      const invokes = withAction(statementsOf(service, s.service, f.fn.role!), 'lambda:');
      if (role === 'ingress') {
        const targets = invokes.flatMap(resources);
        expect(targets).toHaveLength(3);
        expect(targets).toEqual(expect.arrayContaining([{ Ref: pumpId }, { Ref: pollerId }, { Ref: dispatcherId }]));
      } else if (role === 'migrate') {
        expect(invokes, role).toEqual([]);
      } else {
        // The handover (lib/jobs/handover.ts): its own live alias, nothing else.
        expect(invokes.flatMap(resources), role).toEqual([{ Ref: aliasId(role as FunctionRole) }]);
      }
    }
    const env =
      service.toJSON().Resources[s.service.getLogicalId(s.service.functions.ingress.fn.node.defaultChild as never)].Properties.Environment
        .Variables;
    expect(env.MSGX_PUMP_FUNCTION_NAME).toEqual({ Ref: pumpId });
    expect(env.MSGX_POLLER_FUNCTION_NAME).toEqual({ Ref: pollerId });
    expect(env.MSGX_DISPATCHER_FUNCTION_NAME).toEqual({ Ref: dispatcherId });
    // No function calls Scheduler (an operator's `msgx pause` does, with the operator's credentials).
    expect(env.MSGX_SCHEDULE_GROUP).toBeUndefined();
    expect(env.MSGX_SCHEDULE_NAMES).toBeUndefined();
    for (const f of Object.values(s.service.functions))
      expect(
        statementsOf(service, s.service, f.fn.role!)
          .flatMap(actions)
          .filter((a) => a.startsWith('scheduler:') || a === 'iam:PassRole'),
        f.role,
      ).toEqual([]);
  });

  it('lets each function read only its own secrets', () => {
    const expected: Record<string, string[]> = {
      ingress: ['mailbox', 'postgres'],
      poller: ['mailbox', 'postgres'],
      pump: ['mailbox', 'postgres'],
      dispatcher: ['postgres', 'signing'],
      sweep: ['mailbox', 'postgres', 'signing'],
      // The admin secret only for the migration, which creates the functions' user.
      migrate: ['postgres', 'postgres-admin'],
      ...Object.fromEntries(
        ADDED.map((r) => [
          r,
          ['postgres', ...(uses(r, 'mailbox') ? ['mailbox'] : []), ...(uses(r, 'signingSecret') ? ['signing'] : [])].sort(),
        ]),
      ),
    };
    const kind = (r: unknown): string => {
      const j = JSON.stringify(r);
      if (j.includes(MAILBOX_SECRET_ARN)) return 'mailbox';
      if (j.includes('SigningSecret')) return 'signing';
      if (j.includes('AppSecret')) return 'postgres';
      if (j.includes('PostgresSecret')) return 'postgres-admin';
      return `unexpected:${j}`;
    };
    for (const [role, f] of Object.entries(s.service.functions)) {
      const reads = withAction(statementsOf(service, s.service, f.fn.role!), 'secretsmanager:');
      const got = [...new Set(reads.flatMap(resources).map(kind))].sort();
      expect(got, role).toEqual(expected[role]);
      for (const st of reads)
        for (const a of actions(st)) expect(['secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret']).toContain(a);
    }
  });

  it('scopes MSK IAM actions to the cluster and its topics', () => {
    const allowed: Record<string, boolean> = {
      ingress: true,
      poller: false,
      pump: false,
      dispatcher: true,
      sweep: false,
      migrate: true,
      ...Object.fromEntries(ADDED.map((r) => [r, uses(r, 'kafka')])),
    };
    for (const [role, f] of Object.entries(s.service.functions)) {
      const kafka = withAction(statementsOf(service, s.service, f.fn.role!), 'kafka-cluster:');
      if (!allowed[role]) {
        expect(kafka, role).toEqual([]);
        continue;
      }
      expect(kafka.length, role).toBeGreaterThan(0);
      for (const st of kafka) {
        for (const a of actions(st)) expect(a, role).not.toContain('*');
        for (const r of resources(st)) {
          const j = JSON.stringify(r);
          expect(j, role).not.toBe('"*"');
          // The cursor reader's consumer group is the stage's own (msgx.<stage>.cursor-*).
          const bound =
            j.includes('ClusterArn') ||
            j.includes(':topic/msgx-dev/') ||
            j.includes(':transactional-id/msgx-dev/') ||
            j.includes(':group/msgx-dev/*/msgx.dev.cursor-');
          expect(bound, `${role}: ${j}`).toBe(true);
        }
      }
    }
    const migrate = withAction(statementsOf(service, s.service, s.service.functions.migrate.fn.role!), 'kafka-cluster:');
    expect(migrate.flatMap(actions)).toContain('kafka-cluster:CreateTopic');
    const dispatcher = withAction(statementsOf(service, s.service, s.service.functions.dispatcher.fn.role!), 'kafka-cluster:');
    expect(dispatcher.flatMap(actions)).toEqual(
      expect.arrayContaining(['kafka-cluster:DescribeTransactionalId', 'kafka-cluster:AlterTransactionalId']),
    );
    expect(JSON.stringify(migrate)).toContain('msgx.schd');
    const ingress = withAction(statementsOf(service, s.service, s.service.functions.ingress.fn.role!), 'kafka-cluster:');
    expect(ingress.flatMap(actions).sort()).toEqual(['kafka-cluster:Connect', 'kafka-cluster:DescribeCluster']);
  });

  it('wires MSK, the mailbox and the topics into the environment', () => {
    const env = (role: FunctionRole) =>
      service.toJSON().Resources[s.service.getLogicalId(s.service.functions[role].fn.node.defaultChild as never)].Properties.Environment
        .Variables;
    expect(env('dispatcher')).toMatchObject({ MSGX_KAFKA_SSL: '1', MSGX_TOPIC_MSG: 'msgx.msg', MSGX_TOPIC_SCHD: 'msgx.schd' });
    expect(env('dispatcher').MSGX_KAFKA_BROKERS).toBeDefined();
    expect(env('dispatcher').MSGX_KAFKA_IAM_REGION).toEqual({ Ref: 'AWS::Region' });
    expect(env('poller')).toMatchObject({ MSGX_MAILBOX_HOST: 'cmin-db.corp.internal', MSGX_MAILBOX_SECRET_ARN: MAILBOX_SECRET_ARN });
    expect(env('pump').MSGX_TIMEZONE).toBe('Asia/Shanghai');
    expect(env('poller').MSGX_KAFKA_BROKERS).toBeUndefined();
  });

  it('migrates at deploy time through a trigger on the migrate function', () => {
    const triggers = service.findResources('Custom::Trigger');
    expect(Object.keys(triggers)).toHaveLength(1);
    // The version's logical id carries a code hash: a new bundle (code or migrations/) re-runs it.
    const handler = JSON.stringify(Object.values(triggers)[0]!.Properties.HandlerArn);
    expect(handler).toMatch(/"Ref":"MigrateFnCurrentVersion/);
    // The schedules wait for the migration.
    for (const x of Object.values(service.findResources('AWS::Scheduler::Schedule')))
      expect(JSON.stringify(x.DependsOn ?? [])).toMatch(/MigrateTrigger/);
  });

  it('authenticates every route with IAM by default and throttles the stage', () => {
    service.hasResourceProperties('AWS::ApiGatewayV2::Integration', { PayloadFormatVersion: '1.0', IntegrationType: 'AWS_PROXY' });
    const routes = Object.values(service.findResources('AWS::ApiGatewayV2::Route'));
    const keys = routes.map((r) => r.Properties.RouteKey);
    for (const k of [
      'POST /cminmsgs/send',
      'POST /v1/tx-messages',
      'POST /v1/tx-messages/{id}/commit',
      'GET /v1/flights/{flid}',
      'GET /health',
      'ANY /admin/{proxy+}',
      'GET /console',
    ])
      expect(keys).toContain(k);
    for (const r of routes) expect(r.Properties.AuthorizationType, r.Properties.RouteKey).toBe('AWS_IAM');
    service.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      StageName: '$default',
      DefaultRouteSettings: { ThrottlingRateLimit: 20, ThrottlingBurstLimit: 40 },
      AccessLogSettings: Match.anyValue(),
    });
  });

  it('raises alarms on the msgx metrics, heartbeats, Lambda, RDS, MSK and the API, to one SNS topic', () => {
    const t = Template.fromStack(s.monitoring);
    t.resourceCountIs('AWS::SNS::Topic', 1);
    const alarms = Object.values(t.findResources('AWS::CloudWatch::Alarm')).map((a) => a.Properties);
    const dim = (a: { Dimensions: { Name: string; Value: string }[] }, name: string) => a.Dimensions.find((d) => d.Name === name)?.Value;
    const custom = alarms.filter((a) => a.Namespace === 'msgx');
    // Written out by hand: a metric renamed in the code must fail here, not silently follow.
    const scheduled = [...KNOWN_SCHEDULED, ...ADDED];
    const expected = [
      'Backlog',
      'HeadAgeSeconds',
      'OldestPendingEventSeconds',
      ...EXPECTED_DEAD_KINDS.map((k) => `DeadCount/${k}`),
      'BackfillFailures',
      'StalledTargets',
      'OutboxBacklog',
      ...scheduled.map((r) => `Heartbeat/${r}`),
      ...scheduled.filter((r) => ROLE_CATALOGUE[r as ScheduledRole].lock).map((r) => `RoleLockTaken/${r}`),
    ];
    const got = custom.map((a) => [a.MetricName, dim(a, 'kind') ?? dim(a, 'role')].filter(Boolean).join('/'));
    expect(got.sort()).toEqual(expected.sort());
    for (const a of custom) expect(dim(a, 'service')).toBe('msgx');
    // A role that stops reporting is itself the alarm.
    for (const a of custom.filter((x) => x.MetricName === 'Heartbeat')) {
      expect(a.TreatMissingData).toBe('breaching');
      expect(a.ComparisonOperator).toBe('LessThanThreshold');
    }
    for (const a of custom.filter((x) => x.MetricName === 'RoleLockTaken')) {
      expect(a.Statistic).toBe('Minimum');
      expect(a.EvaluationPeriods).toBe(3);
    }
    const lambda = alarms.filter((a) => a.Namespace === 'AWS/Lambda');
    // The functions' and the two rotation functions' (admin, app) errors.
    expect(lambda.filter((a) => a.MetricName === 'Errors')).toHaveLength(FUNCTION_COUNT + 2);
    expect(lambda.filter((a) => a.MetricName === 'Throttles')).toHaveLength(FUNCTION_COUNT);
    const rds = alarms.filter((a) => a.Namespace === 'AWS/RDS');
    expect(rds.map((a) => a.MetricName).sort()).toEqual(['CPUUtilization', 'DatabaseConnections', 'FreeStorageSpace']);
    for (const a of rds) expect(dim(a, 'DBInstanceIdentifier')).toBe('msgx-dev');
    const msk = alarms.filter((a) => a.Namespace === 'AWS/Kafka');
    expect(msk.map((a) => `${a.MetricName}/${dim(a, 'Cluster Name')}/${dim(a, 'Broker ID')}`).sort()).toEqual([
      'ActiveControllerCount/msgx-dev/undefined',
      'KafkaDataLogsDiskUsed/msgx-dev/1',
      'KafkaDataLogsDiskUsed/msgx-dev/2',
      'OfflinePartitionsCount/msgx-dev/undefined',
      'UnderMinIsrPartitionCount/msgx-dev/1',
      'UnderMinIsrPartitionCount/msgx-dev/2',
    ]);
    expect(alarms.filter((a) => a.Namespace === 'AWS/ApiGateway' && a.MetricName === '5xx')).toHaveLength(1);
    for (const a of alarms) expect(a.AlarmActions).toHaveLength(1);
    t.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
  });
});

describe('stage settings come from context', () => {
  it('prod turns on deletion protection, Multi-AZ, longer retention and tighter alarms', () => {
    const s = synth({ stage: 'prod' });
    Template.fromStack(s.data).hasResourceProperties('AWS::RDS::DBInstance', {
      DeletionProtection: true,
      MultiAZ: true,
      BackupRetentionPeriod: 14,
      DBInstanceClass: 'db.m7g.large',
    });
    Template.fromStack(s.service).resourcePropertiesCountIs('AWS::Logs::LogGroup', { RetentionInDays: 90 }, FUNCTION_COUNT + 1);
    Template.fromStack(s.monitoring).hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'HeadAgeSeconds',
      Threshold: 300,
    });
    expect(s.network.stackName).toBe('Msgx-prod-Network');
  });

  it('refuses a deploy without the shared mailbox, in every stage', () => {
    for (const stage of ['dev', 'prod']) {
      const app = new App({ context: { ...CDK_CONTEXT, bundling: 'skip', stage } });
      expect(() => buildMsgx(app, { nag: false })).toThrow(/context mailboxHost is required/);
    }
  });

  it('refuses an IP address as the mailbox host: its TLS certificate is checked by name', () => {
    expect(() => synth({ mailboxHost: '10.20.30.40' })).toThrow(/context mailboxHost must be the mailbox's DNS name .*10\.20\.30\.40/);
  });

  it('rejects an unknown stage and a partial secret ARN, naming the key', () => {
    expect(() => synth({ stage: 'qa' })).toThrow(/stages has no entry "qa"/);
    expect(() => synth({ mailboxSecretArn: 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:cmin/mailbox' })).toThrow(
      /mailboxSecretArn/,
    );
  });

  it('puts a JWT authorizer on upstream routes when asked, keeping admin routes on IAM', () => {
    const s = synth({ upstreamAuth: 'jwt', jwtIssuer: 'https://login.corp.internal', jwtAudience: 'msgx' });
    const t = Template.fromStack(s.service);
    t.hasResourceProperties('AWS::ApiGatewayV2::Authorizer', { AuthorizerType: 'JWT' });
    for (const r of Object.values(t.findResources('AWS::ApiGatewayV2::Route'))) {
      const key: string = r.Properties.RouteKey;
      const admin = key.includes('/admin/') || key.includes('/console');
      expect(r.Properties.AuthorizationType, key).toBe(admin ? 'AWS_IAM' : 'JWT');
    }
  });

  it("gives the ingress the stage's operator roles, and refuses anything but real role ARNs, naming the setting", () => {
    const ops = 'arn:aws:iam::210987654321:role/ops/msgx-operator';
    const ingressEnv = (st: MsgxStacks) =>
      Template.fromStack(st.service).toJSON().Resources[st.service.getLogicalId(st.service.functions.ingress.fn.node.defaultChild as never)]
        .Properties.Environment.Variables;
    expect(ingressEnv(synth()).MSGX_OPERATOR_PRINCIPALS).toBe(''); // cdk.json lists none: nobody is an operator
    expect(ingressEnv(synth({ stages: { dev: { operatorPrincipals: [ops] } } })).MSGX_OPERATOR_PRINCIPALS).toBe(ops);
    expect(() => synth({ stages: { dev: { operatorPrincipals: ['arn:aws:iam::210987654321:user/alice'] } } })).toThrow(
      /stages\.dev\.operatorPrincipals must hold IAM role ARNs .*user\/alice/,
    );
    expect(() => synth({ stages: { dev: { operatorPrincipals: 'arn:aws:iam::210987654321:role/x' } } })).toThrow(
      /stages\.dev\.operatorPrincipals must be a list/,
    );
    expect(() => synth({ stages: { dev: { operatorPrincipals: ['arn:aws:iam::123456789012:role/ops'] } } })).toThrow(
      /looks like a placeholder/,
    );
  });

  it('can leave the secrets extension out by context (regions without the ARM64 layer)', () => {
    const fns = Template.fromStack(synth({ secretsExtension: false }).service).findResources('AWS::Lambda::Function', {
      Properties: { Description: Match.stringLikeRegexp('^msgx ') },
    });
    for (const f of Object.values(fns)) {
      expect(f.Properties.Layers).toBeUndefined();
      expect(f.Properties.Environment.Variables.PARAMETERS_SECRETS_EXTENSION_HTTP_PORT).toBeUndefined();
    }
  });

  it('can run on a newer Node runtime by context', () => {
    const s = synth({ lambdaRuntime: 'nodejs24.x' });
    Template.fromStack(s.service).hasResourceProperties('AWS::Lambda::Function', { Runtime: 'nodejs24.x' });
  });
});

// Stack is imported for its type in statementsOf; keep the import used for isolatedModules.
void Stack;
