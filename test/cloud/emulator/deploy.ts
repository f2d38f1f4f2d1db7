import { randomBytes, randomUUID } from 'node:crypto';
import type { LambdaFunction, LambdaService } from './lambda.ts';
import type { Physical, Resolver } from './resolve.ts';
import type { SchedulerService } from './scheduler.ts';
import { generateSecretString, type SecretStore } from './secrets.ts';
import type { HttpApi } from './api.ts';
import type { Resource, Template } from './synth.ts';

/** What the emulated resources of the data and messaging stacks stand on: the test's own servers. */
export interface Backing {
  /** Creates the RDS instance's master user and database on the private PostgreSQL; returns its endpoint. */
  createDatabase(o: { masterUsername: string; masterPassword: string; dbName: string }): Promise<{ address: string; port: string }>;
  /** The broker the MSK cluster's bootstrap string names (plaintext: MSK's IAM SASL cannot run locally). */
  kafkaBootstrap: string;
}

export interface DeployStep {
  at: number;
  stack: string;
  logicalId: string;
  type: string;
  action: 'create' | 'update' | 'delete';
}

export class DeployError extends Error {
  constructor(
    readonly stackName: string,
    readonly logicalId: string,
    reason: string,
  ) {
    super(`${stackName}/${logicalId}: ${reason}`);
    this.name = 'DeployError';
  }
}

/** Types accepted without anything to emulate: IAM, logs, network, monitoring plumbing. Attributes they answer. */
const PASSIVE: Record<string, string[]> = {
  'AWS::IAM::Role': ['Arn', 'RoleId'],
  'AWS::IAM::Policy': [],
  'AWS::Logs::LogGroup': ['Arn'],
  'AWS::Lambda::Permission': [],
  'AWS::ApiGatewayV2::Stage': [],
  'AWS::Scheduler::ScheduleGroup': ['Arn'],
  'AWS::CDK::Metadata': [],
  'AWS::EC2::SecurityGroup': ['GroupId'],
  'AWS::EC2::SecurityGroupIngress': [],
  'AWS::EC2::SecurityGroupEgress': [],
  'AWS::RDS::DBParameterGroup': [],
  'AWS::RDS::DBSubnetGroup': [],
  'AWS::SecretsManager::RotationSchedule': [],
  'AWS::SecretsManager::ResourcePolicy': [],
  'AWS::Serverless::Application': ['Outputs.RotationLambdaARN'],
  'AWS::MSK::Configuration': ['Arn'],
  'AWS::ApplicationAutoScaling::ScalableTarget': [],
  'AWS::ApplicationAutoScaling::ScalingPolicy': [],
};

/** Stacks that hold only network and monitoring resources: their resources are recorded, not emulated. */
const PASSIVE_STACKS = /-(Network|Monitoring)$/;

/**
 * CloudFormation for the emulated cloud: deploys the stacks in the order of the cloud assembly's
 * manifest and, within a stack, each resource after those it names (DependsOn, Ref, GetAtt,
 * Sub), one at a time. An update applies what changed (a function's code or settings, a new
 * version, a moved alias, a trigger whose handler changed) in the same order, and deletes what the
 * new template dropped last. A failure stops the deploy with the resource and the reason.
 */
export class CloudFormation {
  readonly steps: DeployStep[] = [];
  /** The resolved properties each resource was last deployed with (to tell what an update changes). */
  private readonly deployed = new Map<string, { type: string; props: string }>();
  /** Integrations of the HTTP API by id. */
  private readonly integrations = new Map<string, { uri: string; format: '1.0' | '2.0'; timeoutMs: number }>();

  constructor(
    private readonly o: {
      resolver: Resolver;
      secrets: SecretStore;
      lambda: LambdaService;
      scheduler: SchedulerService;
      api: HttpApi;
      backing: Backing;
      /** The asset folder of an S3 key of a stack's template. */
      assetDir(stack: string, s3Key: string): string;
      region: string;
      account: string;
    },
  ) {}

  async deployStack(stack: string, t: Template): Promise<void> {
    const order = topological(t);
    const seen = new Set<string>();
    for (const id of order) {
      seen.add(id);
      const r = t.Resources[id]!;
      try {
        await this.apply(stack, t, id, r);
      } catch (err) {
        if (err instanceof DeployError) throw err;
        throw new DeployError(stack, id, (err as Error).message);
      }
    }
    for (const key of [...this.deployed.keys()].filter((k) => k.startsWith(`${stack}/`))) {
      const id = key.slice(stack.length + 1);
      if (seen.has(id)) continue;
      this.remove(stack, id, this.deployed.get(key)!.type);
    }
    for (const out of Object.values(t.Outputs ?? {})) {
      if (!out.Export) continue;
      const name = String(this.o.resolver.resolve(stack, t, out.Export.Name, `${stack}.Outputs.Export`));
      this.o.resolver.exports.set(name, () => this.o.resolver.resolve(stack, t, out.Value, `${stack} export ${name}`));
    }
  }

  private async apply(stack: string, t: Template, id: string, r: Resource): Promise<void> {
    const key = `${stack}/${id}`;
    const before = this.deployed.get(key);
    const resolver = this.o.resolver;
    const res = (v: unknown, at: string) => resolver.resolve(stack, t, v, `${key}.${at}`);
    const props = r.Properties ?? {};
    const step = (action: DeployStep['action']) => this.steps.push({ at: Date.now(), stack, logicalId: id, type: r.Type, action });
    const passive = PASSIVE_STACKS.test(stack) || r.Type in PASSIVE;
    if (passive) {
      if (before) return;
      const attrs = Object.fromEntries((PASSIVE[r.Type] ?? []).map((a) => [a, passiveAttr(this.o, r.Type, id, a)]));
      resolver.put(stack, id, { ref: passiveRef(this.o, r.Type, id), attrs });
      this.deployed.set(key, { type: r.Type, props: '' });
      step('create');
      return;
    }
    const handler = this.handlers[r.Type];
    if (!handler) throw new DeployError(stack, id, `resource type ${r.Type} is not known to the emulator`);
    const resolved = handler.props(props, res);
    const text = JSON.stringify(resolved);
    if (text.includes('{{resolve:')) throw new DeployError(stack, id, `a dynamic reference the emulator does not resolve: ${text}`);
    if (before && before.props === text) return;
    const physical = await handler.apply(stack, id, resolved, before ? resolver.get(stack, id, key) : undefined);
    resolver.put(stack, id, physical);
    this.deployed.set(key, { type: r.Type, props: text });
    step(before ? 'update' : 'create');
  }

  private remove(stack: string, id: string, type: string): void {
    const key = `${stack}/${id}`;
    this.deployed.delete(key);
    if (type === 'AWS::Lambda::Version') {
      const arn = this.o.resolver.get(stack, id, key).ref;
      const { fn, qualifier } = this.o.lambda.find(arn);
      fn.versions.delete(qualifier);
    }
    this.o.resolver.resources.delete(key);
    this.steps.push({ at: Date.now(), stack, logicalId: id, type, action: 'delete' });
  }

  private readonly handlers: Record<
    string,
    {
      props(p: Record<string, unknown>, res: (v: unknown, at: string) => unknown): Record<string, unknown>;
      apply(stack: string, id: string, p: Record<string, unknown>, before?: Physical): Promise<Physical> | Physical;
    }
  > = {
    'AWS::SecretsManager::Secret': {
      props: (p, res) => ({ Name: res(p.Name, 'Name'), GenerateSecretString: res(p.GenerateSecretString, 'GenerateSecretString') }),
      apply: (_s, _id, p, before) => {
        if (before) return before;
        const s = this.o.secrets.create(String(p.Name), generateSecretString(p.GenerateSecretString as never));
        return { ref: s.arn };
      },
    },
    'AWS::SecretsManager::SecretTargetAttachment': {
      props: (p, res) => ({ SecretId: res(p.SecretId, 'SecretId'), TargetId: res(p.TargetId, 'TargetId'), TargetType: p.TargetType }),
      apply: (stack, id, p) => {
        if (p.TargetType !== 'AWS::RDS::DBInstance')
          throw new DeployError(stack, id, `attachment to ${String(p.TargetType)} is not emulated`);
        // As RDS writes an attached secret: the connection fields beside username and password.
        const db = this.databases.get(String(p.TargetId));
        if (!db) throw new DeployError(stack, id, `no database ${String(p.TargetId)}`);
        const arn = String(p.SecretId);
        const value = {
          ...this.o.secrets.json(arn),
          engine: 'postgres',
          host: db.address,
          port: Number(db.port),
          dbInstanceIdentifier: p.TargetId,
        };
        this.o.secrets.put(arn, JSON.stringify(value));
        return { ref: arn };
      },
    },
    'AWS::RDS::DBInstance': {
      props: (p, res) => ({
        DBInstanceIdentifier: res(p.DBInstanceIdentifier, 'DBInstanceIdentifier'),
        Engine: p.Engine,
        DBName: res(p.DBName, 'DBName'),
        MasterUsername: res(p.MasterUsername, 'MasterUsername'),
        MasterUserPassword: this.dynamic(res(p.MasterUserPassword, 'MasterUserPassword') as string),
      }),
      apply: async (stack, id, p, before) => {
        if (before) return before;
        if (p.Engine !== 'postgres') throw new DeployError(stack, id, `engine ${String(p.Engine)} is not emulated`);
        const ep = await this.o.backing.createDatabase({
          masterUsername: String(p.MasterUsername),
          masterPassword: String(p.MasterUserPassword),
          dbName: String(p.DBName),
        });
        const ident = String(p.DBInstanceIdentifier);
        this.databases.set(ident, ep);
        return { ref: ident, attrs: { 'Endpoint.Address': ep.address, 'Endpoint.Port': ep.port } };
      },
    },
    'AWS::MSK::Cluster': {
      props: (p, res) => ({ ClusterName: res(p.ClusterName, 'ClusterName') }),
      apply: (_s, _id, p, before) => {
        if (before) return before;
        const arn = `arn:aws:kafka:${this.o.region}:${this.o.account}:cluster/${String(p.ClusterName)}/${randomUUID()}-2`;
        return { ref: arn, attrs: { Arn: arn } };
      },
    },
    'Custom::AWS': {
      props: (p, res) => ({ Create: res(p.Create, 'Create'), Update: res(p.Update, 'Update') }),
      apply: (stack, id, p) => {
        const call = JSON.parse(String(p.Create)) as { service: string; action: string; outputPaths?: string[] };
        if (call.service !== 'Kafka' || call.action !== 'getBootstrapBrokers')
          throw new DeployError(stack, id, `AwsCustomResource ${call.service}.${call.action} is not emulated`);
        return { ref: id, attrs: Object.fromEntries((call.outputPaths ?? []).map((k) => [k, this.o.backing.kafkaBootstrap])) };
      },
    },
    'AWS::Lambda::Function': {
      props: (p, res) => ({
        FunctionName: res(p.FunctionName, 'FunctionName'),
        Code: res(p.Code, 'Code'),
        Handler: res(p.Handler, 'Handler'),
        Runtime: res(p.Runtime, 'Runtime'),
        Timeout: res(p.Timeout, 'Timeout'),
        MemorySize: res(p.MemorySize, 'MemorySize'),
        Environment: res(p.Environment, 'Environment'),
        Layers: res(p.Layers, 'Layers'),
        ReservedConcurrentExecutions: res(p.ReservedConcurrentExecutions, 'ReservedConcurrentExecutions'),
      }),
      apply: (stack, id, p, before) => this.putFunction(stack, id, p, before),
    },
    'AWS::Lambda::Version': {
      props: (p, res) => ({ FunctionName: res(p.FunctionName, 'FunctionName') }),
      apply: (_s, _id, p) => {
        const { fn } = this.o.lambda.find(String(p.FunctionName));
        const version = String(fn.versions.size === 0 ? 1 : Math.max(...[...fn.versions.keys()].map(Number)) + 1);
        // A version is a snapshot of $LATEST as it is at this moment of the deploy.
        fn.versions.set(version, { ...fn.latest, version });
        return { ref: `${fn.arn}:${version}`, attrs: { Version: version } };
      },
    },
    'AWS::Lambda::Alias': {
      props: (p, res) => ({
        FunctionName: res(p.FunctionName, 'FunctionName'),
        FunctionVersion: res(p.FunctionVersion, 'FunctionVersion'),
        Name: res(p.Name, 'Name'),
      }),
      apply: (_s, _id, p) => {
        const { fn } = this.o.lambda.find(String(p.FunctionName));
        const version = String(p.FunctionVersion);
        if (!fn.versions.has(version)) throw new Error(`alias ${String(p.Name)}: no version ${version} of ${fn.name}`);
        fn.aliases.set(String(p.Name), version);
        const arn = `${fn.arn}:${String(p.Name)}`;
        return { ref: arn, attrs: { AliasArn: arn } };
      },
    },
    'AWS::Lambda::EventInvokeConfig': {
      props: (p, res) => ({
        FunctionName: res(p.FunctionName, 'FunctionName'),
        MaximumRetryAttempts: p.MaximumRetryAttempts,
        Qualifier: p.Qualifier,
      }),
      apply: (_s, id, p) => {
        this.o.lambda.find(String(p.FunctionName)).fn.asyncRetries = Number(p.MaximumRetryAttempts ?? 2);
        return { ref: id };
      },
    },
    'Custom::Trigger': {
      props: (p, res) => ({
        ServiceToken: res(p.ServiceToken, 'ServiceToken'),
        HandlerArn: res(p.HandlerArn, 'HandlerArn'),
        InvocationType: p.InvocationType,
        Timeout: p.Timeout,
        ExecuteOnHandlerChange: p.ExecuteOnHandlerChange,
      }),
      apply: async (stack, id, p) => {
        // CDK's trigger provider: invoke the handler (a version) and fail the deploy if it fails.
        this.o.lambda.find(String(p.ServiceToken));
        const r = await this.o.lambda.invoke(String(p.HandlerArn), {}, { type: 'RequestResponse' });
        const { startedAt, endedAt } = r.invocation;
        this.triggerResults.push({ startedAt, endedAt: endedAt!, handlerArn: String(p.HandlerArn), ok: r.ok, payload: r.payload });
        if (!r.ok) throw new DeployError(stack, id, `trigger handler ${String(p.HandlerArn)} failed: ${JSON.stringify(r.payload)}`);
        return { ref: id };
      },
    },
    'AWS::Scheduler::Schedule': {
      props: (p, res) => res(p, 'Properties') as Record<string, unknown>,
      apply: (_s, _id, p) => {
        const s = this.o.scheduler.put({
          Name: String(p.Name),
          GroupName: String(p.GroupName ?? 'default'),
          ScheduleExpression: String(p.ScheduleExpression),
          ScheduleExpressionTimezone: p.ScheduleExpressionTimezone as string | undefined,
          FlexibleTimeWindow: p.FlexibleTimeWindow as never,
          Target: p.Target as never,
          State: (p.State as 'ENABLED' | 'DISABLED' | undefined) ?? 'ENABLED',
          Description: p.Description as string | undefined,
        });
        return { ref: s.Name, attrs: { Arn: s.Arn } };
      },
    },
    'AWS::ApiGatewayV2::Api': {
      props: (p, res) => ({ Name: res(p.Name, 'Name'), ProtocolType: p.ProtocolType }),
      apply: () => ({ ref: this.o.api.apiId, attrs: { ApiEndpoint: this.o.api.url, ApiId: this.o.api.apiId } }),
    },
    'AWS::ApiGatewayV2::Integration': {
      props: (p, res) => ({
        ApiId: res(p.ApiId, 'ApiId'),
        IntegrationType: p.IntegrationType,
        IntegrationUri: res(p.IntegrationUri, 'IntegrationUri'),
        PayloadFormatVersion: p.PayloadFormatVersion,
        TimeoutInMillis: p.TimeoutInMillis,
      }),
      apply: (stack, id, p, before) => {
        if (p.IntegrationType !== 'AWS_PROXY')
          throw new DeployError(stack, id, `integration type ${String(p.IntegrationType)} is not emulated`);
        const ref = before?.ref ?? randomBytes(4).toString('hex');
        const uri = String(p.IntegrationUri).replace(
          /^arn:aws:apigateway:[^:]+:lambda:path\/2015-03-31\/functions\/(.+)\/invocations$/,
          '$1',
        );
        this.integrations.set(ref, {
          uri,
          format: p.PayloadFormatVersion as '1.0' | '2.0',
          timeoutMs: Number(p.TimeoutInMillis ?? 30_000),
        });
        this.refreshRoutes();
        return { ref };
      },
    },
    'AWS::ApiGatewayV2::Route': {
      props: (p, res) => ({
        ApiId: res(p.ApiId, 'ApiId'),
        RouteKey: p.RouteKey,
        AuthorizationType: p.AuthorizationType ?? 'NONE',
        Target: res(p.Target, 'Target'),
      }),
      apply: (_s, id, p) => {
        this.routeDefs.set(id, { routeKey: String(p.RouteKey), authorizationType: String(p.AuthorizationType), target: String(p.Target) });
        this.refreshRoutes();
        return { ref: id };
      },
    },
  };

  readonly triggerResults: { startedAt: number; endedAt: number; handlerArn: string; ok: boolean; payload: unknown }[] = [];
  private readonly databases = new Map<string, { address: string; port: string }>();
  private readonly routeDefs = new Map<string, { routeKey: string; authorizationType: string; target: string }>();

  private refreshRoutes(): void {
    const routes = [];
    for (const r of this.routeDefs.values()) {
      const integration = this.integrations.get(r.target.replace(/^integrations\//, ''));
      if (!integration) continue;
      routes.push({
        routeKey: r.routeKey,
        authorizationType: r.authorizationType,
        integration: { functionArn: integration.uri, payloadFormatVersion: integration.format, timeoutMs: integration.timeoutMs },
      });
    }
    this.o.api.routes = routes;
  }

  /** `{{resolve:secretsmanager:<arn>:SecretString:<key>::}}` → the value now in the store. */
  private dynamic(text: string): string {
    return text.replace(/\{\{resolve:secretsmanager:(.+?):SecretString:([^:}]+)::\}\}/g, (_, arn: string, k: string) =>
      String(this.o.secrets.json(arn)[k]),
    );
  }

  private putFunction(stack: string, id: string, p: Record<string, unknown>, before?: Physical): Physical {
    const code = p.Code as { S3Key?: string; ZipFile?: string };
    if (!code.S3Key) throw new DeployError(stack, id, 'code that is not an S3 asset (inline code) is not emulated');
    const runtime = String(p.Runtime);
    if (!/^nodejs\d+\.x$/.test(runtime)) throw new DeployError(stack, id, `runtime ${runtime} is not emulated`);
    const layers = (p.Layers as string[] | undefined) ?? [];
    const name = before?.ref ?? (p.FunctionName as string | undefined) ?? physicalName(stack, id);
    const latest = {
      functionName: name,
      version: '$LATEST',
      codeDir: this.o.assetDir(stack, code.S3Key),
      codeKey: code.S3Key,
      handler: String(p.Handler),
      runtime,
      timeoutSeconds: Number(p.Timeout ?? 3),
      memoryMb: Number(p.MemorySize ?? 128),
      environment: Object.fromEntries(
        Object.entries((p.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {}).map(([k, v]) => [
          k,
          String(v),
        ]),
      ),
      secretsExtension: layers.some((l) => /:layer:AWS-Parameters-and-Secrets-Lambda-Extension/.test(l)),
      reservedConcurrency: p.ReservedConcurrentExecutions === undefined ? undefined : Number(p.ReservedConcurrentExecutions),
    };
    const arn = `arn:aws:lambda:${this.o.region}:${this.o.account}:function:${name}`;
    const existing = this.o.lambda.functions.get(name);
    if (existing) existing.latest = latest;
    else {
      const fn: LambdaFunction = { name, arn, logicalId: id, latest, versions: new Map(), aliases: new Map(), asyncRetries: 2 };
      this.o.lambda.functions.set(name, fn);
    }
    return { ref: name, attrs: { Arn: arn } };
  }
}

/** A physical name as CloudFormation makes one: stack, logical id, a random suffix (64 characters at most). */
function physicalName(stack: string, id: string): string {
  const suffix = randomBytes(6).toString('hex').toUpperCase().slice(0, 12);
  return `${stack.slice(0, 20)}-${id.slice(0, 30)}-${suffix}`;
}

function passiveRef(o: { region: string; account: string }, type: string, id: string): string {
  if (type === 'AWS::Logs::LogGroup') return `/emulated/${id}`;
  if (type === 'AWS::IAM::Role') return `${id}-${randomBytes(4).toString('hex')}`;
  return `${(type.split('::')[2] ?? type).toLowerCase()}-${id}`;
}

function passiveAttr(o: { region: string; account: string }, type: string, id: string, attr: string): string {
  if (attr === 'GroupId') return `sg-${randomBytes(8).toString('hex')}`;
  if (type === 'AWS::IAM::Role' && attr === 'Arn') return `arn:aws:iam::${o.account}:role/${id}`;
  if (type === 'AWS::IAM::Role') return `AROA${randomBytes(8).toString('hex').toUpperCase()}`;
  if (type === 'AWS::Serverless::Application') return `arn:aws:lambda:${o.region}:${o.account}:function:${id}`;
  return `arn:aws:emulated:${o.region}:${o.account}:${id}`;
}

/** The resources of a template, each after those it depends on (DependsOn and every Ref/GetAtt/Sub it makes). */
export function topological(t: Template): string[] {
  const deps = new Map<string, Set<string>>();
  for (const [id, r] of Object.entries(t.Resources)) {
    const d = new Set<string>([r.DependsOn ?? []].flat());
    collectRefs(r.Properties, d);
    for (const x of [...d]) if (!(x in t.Resources)) d.delete(x);
    deps.set(id, d);
  }
  const out: string[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (id: string, path: string[]) => {
    if (state.get(id) === 'done') return;
    if (state.get(id) === 'visiting') throw new Error(`dependency cycle: ${[...path, id].join(' → ')}`);
    state.set(id, 'visiting');
    for (const d of deps.get(id)!) visit(d, [...path, id]);
    state.set(id, 'done');
    out.push(id);
  };
  for (const id of Object.keys(t.Resources)) visit(id, []);
  return out;
}

function collectRefs(v: unknown, into: Set<string>): void {
  if (v === null || typeof v !== 'object') return;
  if (Array.isArray(v)) return v.forEach((x) => collectRefs(x, into));
  for (const [k, x] of Object.entries(v)) {
    if (k === 'Ref' && typeof x === 'string') into.add(x);
    else if (k === 'Fn::GetAtt') into.add(Array.isArray(x) ? String(x[0]) : String(x).split('.')[0]!);
    else if (k === 'Fn::Sub') {
      const text = Array.isArray(x) ? String(x[0]) : String(x);
      for (const m of text.matchAll(/\$\{([^}.!]+)/g)) into.add(m[1]!);
      if (Array.isArray(x)) collectRefs(x[1], into);
    } else collectRefs(x, into);
  }
}
