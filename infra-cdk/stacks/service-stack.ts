import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import * as authorizers from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as triggers from 'aws-cdk-lib/triggers';
import type { Construct } from 'constructs';
import {
  DEFAULT_OFFSETS_TOPIC,
  FUNCTION_ROLES,
  type FunctionRole,
  type MsgxSettings,
  SCHEDULED_ROLES,
  type ScheduledRole,
} from '../config.ts';
import { MsgxFunction } from '../constructs/msgx-function.ts';
import type { DataStack } from './data-stack.ts';
import type { MessagingStack } from './messaging-stack.ts';
import type { NetworkStack } from './network-stack.ts';
import { acknowledge } from '../nag.ts';
import { dataRemovalPolicy } from '../retention.ts';
import { SEND_PATH } from '../../lib/constants.ts';
import { ROLE_CATALOGUE } from '../../lib/app/catalogue.ts';

export interface ServiceStackProps extends StackProps {
  msgx: MsgxSettings;
  repoRoot: string;
  network: NetworkStack;
  data: DataStack;
  messaging: MessagingStack;
}

/** Upstream routes: authenticated by IAM unless `upstreamAuth` selects a JWT or Lambda authorizer. */
export const UPSTREAM_ROUTES: [apigwv2.HttpMethod, string][] = [
  [apigwv2.HttpMethod.POST, SEND_PATH],
  [apigwv2.HttpMethod.POST, '/v1/tx-messages'],
  [apigwv2.HttpMethod.GET, '/v1/tx-messages/{id}'],
  [apigwv2.HttpMethod.POST, '/v1/tx-messages/{id}/commit'],
  [apigwv2.HttpMethod.POST, '/v1/tx-messages/{id}/rollback'],
  [apigwv2.HttpMethod.POST, '/v1/tx-messages/{id}/ack'],
  [apigwv2.HttpMethod.GET, '/v1/flights'],
  [apigwv2.HttpMethod.GET, '/v1/flights/{flid}'],
  // The replaced system's query route (lib/flights/routes.ts), for its consumers as they were.
  [apigwv2.HttpMethod.GET, '/all/flights'],
  [apigwv2.HttpMethod.GET, '/health'],
];
/** Operator routes: always IAM, whatever `upstreamAuth` says. */
export const ADMIN_ROUTES: [apigwv2.HttpMethod, string][] = [
  [apigwv2.HttpMethod.ANY, '/admin/{proxy+}'],
  [apigwv2.HttpMethod.GET, '/console'],
  [apigwv2.HttpMethod.GET, '/console/{proxy+}'],
];

/**
 * The functions, the HTTP API in front of the ingress, the once-a-minute schedules of the
 * background roles, and the deploy-time migration trigger.
 */
export class ServiceStack extends Stack {
  readonly functions: Record<FunctionRole, MsgxFunction>;
  readonly api: apigwv2.HttpApi;
  readonly scheduleGroup: scheduler.ScheduleGroup;
  readonly schedules: Record<ScheduledRole, scheduler.Schedule>;
  readonly schedulerRole: iam.Role;

  constructor(scope: Construct, id: string, props: ServiceStackProps) {
    super(scope, id, props);
    this.functions = this.createFunctions(props);
    this.bindResources(props);
    const migration = this.migrationTrigger(props.msgx);
    ({ group: this.scheduleGroup, role: this.schedulerRole, schedules: this.schedules } = this.createSchedules(props.msgx));
    // Explicit as well as implied by the alias the schedules invoke.
    for (const role of SCHEDULED_ROLES) migration.executeBefore(this.schedules[role]);
    this.api = this.createApi(props.msgx);

    new CfnOutput(this, 'ApiUrl', { value: this.api.apiEndpoint, description: 'msgx HTTP API endpoint' });
    new CfnOutput(this, 'ScheduleGroupName', { value: `msgx-${props.msgx.stage}` });
    new CfnOutput(this, 'ScheduleNames', { value: SCHEDULED_ROLES.map((r) => scheduleName(props.msgx.stage, r)).join(',') });
    new CfnOutput(this, 'PumpFunctionName', { value: this.functions.pump.functionName });

    acknowledge(this, [
      {
        id: 'AwsSolutions-IAM4',
        reason: 'The CDK trigger provider uses AWSLambdaBasicExecutionRole for its own logs only.',
        appliesTo: ['Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole'],
      },
    ]);
  }

  /** One function per role, every msgx setting of the stage in its environment (validated at synth by the functions' own schema). */
  private createFunctions(props: ServiceStackProps): Record<FunctionRole, MsgxFunction> {
    const { msgx, network } = props;
    const { settings, stage } = msgx;
    // The scheduled roles and their settings come from the role catalogue (lib/app/catalogue.ts).
    const descriptions: Record<FunctionRole, string> = {
      ingress: 'msgx HTTP API: mailbox ingress, transactional messages, flights, admin',
      ...(Object.fromEntries(SCHEDULED_ROLES.map((r) => [r, ROLE_CATALOGUE[r].description])) as Record<ScheduledRole, string>),
      migrate: 'msgx migrate: schema migrations and Kafka topics (deploy-time trigger)',
    };
    const common = { TZ: 'UTC', ...msgx.functionEnv };
    const make = (role: FunctionRole): MsgxFunction =>
      new MsgxFunction(this, cap(role), {
        role,
        repoRoot: props.repoRoot,
        bundling: msgx.bundling,
        runtime: msgx.lambdaRuntime,
        secretsExtension: msgx.secretsExtension,
        vpc: network.vpc,
        subnets: network.appSubnets,
        securityGroups: [network.functionSg],
        memoryMb: settings.functions.memoryMb[role],
        timeout: Duration.seconds(settings.functions.timeoutSeconds[role]),
        logRetentionDays: settings.functions.logRetentionDays,
        logRemovalPolicy: dataRemovalPolicy(stage),
        // The ingress's is its share of the database's connections (config.ts connectionBudget);
        // the others' off unless configured: the advisory lock and row locks are their guard.
        reservedConcurrency: settings.functions.reservedConcurrency[role],
        asyncMaxEventAge: (SCHEDULED_ROLES as readonly string[]).includes(role) ? Duration.seconds(60) : undefined,
        environment: common,
        description: descriptions[role],
      });
    return Object.fromEntries(FUNCTION_ROLES.map((r) => [r, make(r)])) as Record<FunctionRole, MsgxFunction>;
  }

  /** Bindings: each grant travels with its environment variable. */
  private bindResources(props: ServiceStackProps): void {
    const { msgx, data, messaging } = props;
    const fns = this.functions;
    const pg = data.postgres;
    const mailboxSecret = secretsmanager.Secret.fromSecretCompleteArn(this, 'MailboxSecret', msgx.mailbox.secretArn);
    const mailbox = { secret: mailboxSecret, ...msgx.mailbox };
    const kafka = {
      clusterArn: messaging.clusterArn,
      clusterName: messaging.clusterName,
      bootstrapBrokers: messaging.bootstrapBrokers,
    };
    const { topicMsg, topicSchd } = msgx.kafka;
    // Exactly once: the targets' cursors (MSGX_TOPIC_OFFSETS, lib/config/config.ts's default).
    const topicOffsets = msgx.functionEnv.MSGX_TOPIC_OFFSETS ?? DEFAULT_OFFSETS_TOPIC;
    const offsetsTopics = [topicOffsets, `${topicOffsets}.shadow`];
    // Shadow mode (MSGX_SHADOW) writes to `<topic>.shadow`; the grant covers both.
    const ownTopics = [topicMsg, `${topicMsg}.shadow`, topicSchd, `${topicSchd}.shadow`, ...offsetsTopics];
    // The topics producers may name (MSGX_TX_TOPICS), as msgx writes them (lib/outbox/publish.ts).
    const txTopics = msgx.kafka.txTopics.map((t) => (msgx.kafka.shadow ? `${t}.shadow` : t));

    for (const f of Object.values(fns)) if (f !== fns.migrate) f.bindPostgres(pg);
    // The migrate function connects as the admin to create the functions' user (msgx_app) with
    // the app secret's password, run the migrations and grant msgx_app what it needs.
    if (pg.adminSecret) fns.migrate.bindPostgres({ ...pg, secret: pg.adminSecret }).bindPostgresAppUser(pg.secret);
    else fns.migrate.bindPostgres(pg);
    fns.ingress.bindMailbox(mailbox);
    fns.ingress.bindKafka(kafka); // /health only: connect and describe
    fns.migrate.bindKafka({ ...kafka, adminTopics: [...ownTopics, ...txTopics] });
    // A scheduled role gets what its catalogue entry says it uses: the mailbox, Kafka (writing
    // msgx's topics and the transactional producers' ones), the signing secret.
    for (const role of SCHEDULED_ROLES) {
      const uses: readonly string[] = ROLE_CATALOGUE[role].uses;
      if (uses.includes('mailbox')) fns[role].bindMailbox(mailbox);
      if (uses.includes('kafka'))
        fns[role].bindKafka({ ...kafka, writeTopics: [...ownTopics, ...txTopics], exactlyOnce: { stage: msgx.stage, offsetsTopics } });
      if (uses.includes('signingSecret')) fns[role].bindSigningSecret(data.signingSecret);
    }
  }

  /**
   * Migrations at deploy time, then the new code. Runs after the database and the cluster exist
   * (they are in stacks this one depends on) and again whenever the migrate bundle (code or
   * migrations/) changes. A failure fails the deploy.
   */
  private migrationTrigger(msgx: MsgxSettings): triggers.Trigger {
    const fns = this.functions;
    const migration = new triggers.Trigger(this, 'MigrateTrigger', {
      handler: fns.migrate.fn,
      timeout: Duration.seconds(msgx.settings.functions.timeoutSeconds.migrate),
      invocationType: triggers.InvocationType.REQUEST_RESPONSE,
      executeOnHandlerChange: true,
    });
    // Every other function's new version goes live (its `live` alias, what every caller invokes)
    // only after the migration succeeded: nothing runs new code against an unmigrated schema.
    for (const role of FUNCTION_ROLES) if (role !== 'migrate') fns[role].publishLive(migration);

    fns.ingress.bindInvoke(fns.pump, 'MSGX_PUMP_FUNCTION_NAME');
    fns.ingress.bindInvoke(fns.poller, 'MSGX_POLLER_FUNCTION_NAME');
    fns.ingress.bindInvoke(fns.dispatcher, 'MSGX_DISPATCHER_FUNCTION_NAME');
    // Each looping role starts its successor before its budget ends (lib/jobs/handover.ts).
    for (const role of SCHEDULED_ROLES) fns[role].allowSelfInvoke();
    // Who is an operator on the admin routes (lib/http/operators.ts); an empty list: nobody.
    fns.ingress.fn.addEnvironment('MSGX_OPERATOR_PRINCIPALS', msgx.settings.operatorPrincipals.join(','));
    return migration;
  }

  private live(role: FunctionRole): lambda.Alias {
    return this.functions[role].live!;
  }

  /**
   * The background roles' schedules. No function calls Scheduler: `msgx pause|resume` run by an
   * operator disables/enables these schedules with the operator's own credentials (the names are
   * this stack's outputs).
   */
  private createSchedules(msgx: MsgxSettings) {
    const { stage } = msgx;
    const group = new scheduler.ScheduleGroup(this, 'ScheduleGroup', {
      scheduleGroupName: `msgx-${stage}`,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const role = new iam.Role(this, 'SchedulerRole', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': this.account } },
      }),
      description: 'EventBridge Scheduler: invoke the scheduled msgx functions, nothing else',
    });
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: SCHEDULED_ROLES.map((r) => this.live(r).functionArn),
      }),
    );
    const schedules = {} as Record<ScheduledRole, scheduler.Schedule>;
    for (const r of SCHEDULED_ROLES) {
      const every = ROLE_CATALOGUE[r].everyMinutes;
      schedules[r] = new scheduler.Schedule(this, `Schedule${cap(r)}`, {
        scheduleName: scheduleName(stage, r),
        scheduleGroup: group,
        description: `msgx ${r}: one worker loop ${every === 1 ? 'a minute' : `every ${every} minutes`} (runs until its budget is spent)`,
        schedule: scheduler.ScheduleExpression.rate(Duration.minutes(every)),
        target: new LambdaTarget(this.live(r), role),
        // A role switched off (MSGX_DISABLED_ROLES) is never scheduled; its function exits if invoked anyway.
        enabled: !disabledRoles(msgx.functionEnv).includes(r),
      });
    }
    return { group, role, schedules };
  }

  /** The HTTP API in front of the ingress: upstream routes with their authorizer, admin routes always IAM. */
  private createApi(msgx: MsgxSettings): apigwv2.HttpApi {
    const { settings, stage } = msgx;
    const accessLogs = new logs.LogGroup(this, 'ApiAccessLogs', {
      retention: settings.api.accessLogRetentionDays,
      removalPolicy: dataRemovalPolicy(stage),
    });
    const api = new apigwv2.HttpApi(this, 'Api', {
      apiName: `msgx-${stage}`,
      description: 'msgx: upstream ingress, transactional messages, flights, admin',
      createDefaultStage: false,
    });
    api.addStage('DefaultStage', {
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: settings.api.throttleRatePerSecond, burstLimit: settings.api.throttleBurst },
      accessLogSettings: {
        destination: new apigwv2.LogGroupLogDestination(accessLogs),
        format: apigw.AccessLogFormat.jsonWithStandardFields({
          caller: true,
          httpMethod: true,
          ip: true,
          protocol: true,
          requestTime: true,
          resourcePath: true,
          responseLength: true,
          status: true,
          user: true,
        }),
      },
    });
    // Payload 1.0 (httpMethod, path, requestContext.identity.userArn): what lib/http/apigw.ts reads.
    const integration = new HttpLambdaIntegration('Ingress', this.live('ingress'), {
      payloadFormatVersion: apigwv2.PayloadFormatVersion.VERSION_1_0,
    });
    const iamAuth = new authorizers.HttpIamAuthorizer();
    const upstreamAuth = upstreamAuthorizer(this, msgx) ?? iamAuth;
    for (const [method, path] of UPSTREAM_ROUTES) api.addRoutes({ path, methods: [method], integration, authorizer: upstreamAuth });
    for (const [method, path] of ADMIN_ROUTES) api.addRoutes({ path, methods: [method], integration, authorizer: iamAuth });
    return api;
  }
}

function scheduleName(stage: string, role: ScheduledRole): string {
  return `msgx-${stage}-${role}`;
}

/** Scheduler target with our shared role: no per-target role, no retries (the next minute comes anyway). */
class LambdaTarget implements scheduler.IScheduleTarget {
  constructor(
    private readonly fn: lambda.IFunction,
    private readonly role: iam.IRole,
  ) {}

  bind(): scheduler.ScheduleTargetConfig {
    return {
      arn: this.fn.functionArn,
      role: this.role,
      retryPolicy: { maximumRetryAttempts: 0, maximumEventAgeInSeconds: 60 },
    };
  }
}

function upstreamAuthorizer(scope: Construct, msgx: MsgxSettings): apigwv2.IHttpRouteAuthorizer | undefined {
  const a = msgx.api;
  if (a.upstreamAuth === 'jwt') return new authorizers.HttpJwtAuthorizer('UpstreamJwt', a.jwtIssuer ?? '', { jwtAudience: a.jwtAudience });
  if (a.upstreamAuth === 'lambda') {
    const fn = lambda.Function.fromFunctionArn(scope, 'UpstreamAuthorizerFn', a.authorizerFunctionArn ?? '');
    return new authorizers.HttpLambdaAuthorizer('UpstreamLambda', fn, {
      responseTypes: [authorizers.HttpLambdaResponseType.SIMPLE],
      resultsCacheTtl: Duration.minutes(5),
    });
  }
  return undefined;
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** The roles a stage switched off (its MSGX_DISABLED_ROLES, validated at synth by the functions' schema). */
export function disabledRoles(env: Record<string, string>): string[] {
  return (env.MSGX_DISABLED_ROLES ?? '')
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
}
