import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { type MariadbInstance, mariadbStart, mariadbStop } from '../../faults/privateServices.ts';
import { freePort } from '../../helpers/freePort.ts';
import { startPrivatePg, type PrivatePg } from '../../helpers/privatePg.ts';
import { makeCa, makeServerCert } from '../../helpers/testCa.ts';
import type { AccessKey } from '../../helpers/sigv4Verify.ts';
import { HttpApi } from './api.ts';
import { CloudFormation } from './deploy.ts';
import { listen, type Listening, readBody, sendJson } from './http.ts';
import { apiIntegration, type FunctionCode, LambdaError, LambdaService } from './lambda.ts';
import { Resolver } from './resolve.ts';
import { SchedulerService } from './scheduler.ts';
import { SecretsExtension, SecretStore } from './secrets.ts';
import { assetDir, type CloudAssembly, MAILBOX_SECRET_ARN, readTemplates, REPO, synthStage, type Template } from './synth.ts';

export { IAM_PRINCIPAL_HEADER } from './api.ts';
export type { AccessKey } from '../../helpers/sigv4Verify.ts';
export type { CloudAssembly } from './synth.ts';

const REGION = 'eu-west-1';
const ACCOUNT = '210987654321';
/** The broker every run shares; the topics are the run's own (synthStage names them). */
const KAFKA = '127.0.0.1:9092';

export interface StartOptions {
  /** A synthesized assembly to deploy (default: synthesize the stage now). */
  assembly?: CloudAssembly;
  /** How much faster than real time the schedules' clock runs (rate(1 minute) fires every 60/factor s). */
  clockFactor?: number;
  /** The account's access keys: a SigV4-signed request to the API is verified against these and calls as its key's principal. */
  accessKeys?: readonly AccessKey[];
}

export interface Emulator {
  stage: string;
  assembly: CloudAssembly;
  /** The HTTP API's base URL (the stack's ApiUrl output). */
  apiUrl: string;
  /** Invokes a function synchronously: by role (`pump`: the Service stack function whose logical id starts with Pump), name or ARN. */
  invoke(fn: string, event?: unknown): ReturnType<LambdaService['invoke']>;
  /** The physical name of a role's function. */
  functionName(role: string): string;
  lambda: LambdaService;
  schedules: SchedulerService;
  clock: { factor: number };
  kafka: { brokers: string[]; topics: { msg: string; schd: string } };
  pg: { superUrl: string; caFile: string; host: string; port: number };
  mailbox: { ownerUrl: string; database: string };
  secrets: SecretStore;
  extension: SecretsExtension;
  cloudFormation: CloudFormation;
  /** The AWS API endpoint (Lambda, Scheduler, Secrets Manager) the functions are given; for a CLI run too. */
  awsEndpoint: string;
  /** Environment for a process that talks to the emulated AWS APIs (endpoints, dummy credentials, region). */
  awsEnv: Record<string, string>;
  /** Where each function's output is written, one file per function. */
  logDir: string;
  /**
   * Deploys the Service stack again with every msgx function rebuilt and a migration (the next
   * number, `label`) added to the migrate bundle; resolves with the migration's file name.
   */
  upgrade(migration: { label: string; sql: string }): Promise<string>;
  /** Rotates a database secret as its rotation function would (alternating users when it names a master secret). */
  rotate(secretName: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The emulated cloud of one stage: synthesizes (or takes) the cloud assembly, starts the services
 * the stacks stand on — a private PostgreSQL with passwords and TLS, a private MariaDB with TLS as
 * the mailbox, the shared Kafka broker — and the AWS services msgx uses (Lambda, the HTTP API,
 * EventBridge Scheduler, Secrets Manager and the secrets extension), then deploys every stack as
 * `cdk deploy` would. docs/cloud-tests.md lists what is emulated and what is real.
 */
export async function start(stage: string, o: StartOptions = {}): Promise<Emulator> {
  const assembly = o.assembly ?? (await synthStage(stage));
  const templates = readTemplates(assembly);
  const dir = mkdtempSync(join(tmpdir(), 'msgx-cloudemu-'));
  // MSGX_CLOUD_LOGS=<folder>: the functions' output is written there and kept after stop().
  const logDir = process.env.MSGX_CLOUD_LOGS ? mkdtempSync(join(process.env.MSGX_CLOUD_LOGS, 'run-')) : join(dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const cleanup: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const c of cleanup.reverse()) await c().catch(() => {});
    // MSGX_CLOUD_KEEP_LOGS=<dir>: the functions' output survives the run, to read after a failure.
    if (process.env.MSGX_CLOUD_KEEP_LOGS) cpSync(logDir, join(process.env.MSGX_CLOUD_KEEP_LOGS, basename(dir)), { recursive: true });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // ---- the servers the data stacks stand on ----------------------------------------------
    const pgServer: PrivatePg = await startPrivatePg();
    cleanup.push(() => pgServer.stop());
    const mb = await startMailbox(dir);
    cleanup.push(() => mariadbStop(mb.instance, true));
    // The runtime's CA bundle (RDS's in Lambda): the CAs of both database servers.
    const caBundle = join(dir, 'runtime-ca-cert.pem');
    writeFileSync(caBundle, readFileSync(pgServer.caFile, 'utf8') + readFileSync(mb.caFile, 'utf8'));

    // ---- the AWS services -------------------------------------------------------------------
    const secrets = new SecretStore(`arn:aws:secretsmanager:${REGION}:${ACCOUNT}`);
    secrets.create(
      'cmin/mailbox',
      JSON.stringify({ username: mb.user, password: mb.password, engine: 'mysql', host: 'localhost', port: mb.instance.port }),
      MAILBOX_SECRET_ARN,
    );
    const extension = new SecretsExtension(secrets);
    await extension.start();
    cleanup.push(() => extension.close());
    let awsServer: Listening | undefined;
    const lambda: LambdaService = new LambdaService({
      region: REGION,
      account: ACCOUNT,
      logDir,
      environment: (code, token) => functionEnvironment(code, token, { caBundle, awsEndpoint: awsServer!.url, extension }),
    });
    cleanup.push(() => lambda.stop());
    const factor = o.clockFactor ?? 4;
    const scheduler = new SchedulerService({
      factor,
      region: REGION,
      account: ACCOUNT,
      invoke: (arn, input) => lambda.invokeAsync(arn, input),
    });
    cleanup.push(async () => scheduler.stop());
    awsServer = await listen((req, res) => {
      void (async () => {
        const body = await readBody(req);
        const url = new URL(req.url ?? '/', 'http://aws');
        const target = req.headers['x-amz-target'];
        if (typeof target === 'string' && target.startsWith('secretsmanager.'))
          return secrets.handleApi(target, JSON.parse(body.toString('utf8') || '{}') as { SecretId?: string }, res);
        if (url.pathname.startsWith('/schedules'))
          return scheduler.handleApi(req.method ?? 'GET', url, JSON.parse(body.toString('utf8') || '{}') as Record<string, unknown>, res);
        const invoke = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/.exec(url.pathname);
        if (invoke && req.method === 'POST') return lambdaInvoke(lambda, decodeURIComponent(invoke[1]!), url, req.headers, body, res);
        sendJson(
          res,
          400,
          { message: `${req.method} ${url.pathname} is not emulated` },
          { 'x-amzn-errortype': 'UnknownOperationException' },
        );
      })().catch((err) => sendJson(res, 500, { message: String(err) }));
    });
    cleanup.push(() => awsServer.close());
    const api = new HttpApi(randomBytes(5).toString('hex'), {
      account: ACCOUNT,
      region: REGION,
      accessKeys: o.accessKeys,
      invoke: apiIntegration(lambda),
    });
    await api.start();
    cleanup.push(() => api.close());

    // ---- CloudFormation -----------------------------------------------------------------------
    const resolver = new Resolver({ region: REGION, account: ACCOUNT });
    const extraAssets = new Map<string, string>();
    const cfn = new CloudFormation({
      resolver,
      secrets,
      lambda,
      scheduler,
      api,
      region: REGION,
      account: ACCOUNT,
      assetDir: (stack, key) => extraAssets.get(key) ?? assetDir(assembly, stack, key),
      backing: {
        kafkaBootstrap: KAFKA,
        createDatabase: async ({ masterUsername, masterPassword, dbName }) => {
          const c = new pg.Client({ connectionString: pgServer.superUrl });
          await c.connect();
          try {
            // The RDS master user: not a superuser, but may create roles and databases.
            await c.query(`CREATE ROLE ${ident(masterUsername)} LOGIN CREATEDB CREATEROLE PASSWORD ${literal(masterPassword)}`);
            await c.query(`CREATE DATABASE ${ident(dbName)} OWNER ${ident(masterUsername)}`);
          } finally {
            await c.end();
          }
          return { address: 'localhost', port: String(pgServer.port) };
        },
      },
    });
    const order = stackOrder(assembly);
    for (const stack of order) await cfn.deployStack(stack, templates.get(stack)!);

    const service = `Msgx-${stage}-Service`;
    const functionName = (role: string): string => {
      const id = Object.keys(templates.get(service)!.Resources).find(
        (k) => templates.get(service)!.Resources[k]!.Type === 'AWS::Lambda::Function' && k.toLowerCase().startsWith(`${role}fn`),
      );
      if (!id) return role;
      return resolver.get(service, id, role).ref;
    };
    let current = templates.get(service)!;
    return {
      stage,
      assembly,
      apiUrl: api.url,
      invoke: (fn, event = {}) => lambda.invoke(functionName(fn), event),
      functionName,
      lambda,
      schedules: scheduler,
      clock: { factor },
      kafka: { brokers: [KAFKA], topics: assembly.topics },
      pg: { superUrl: pgServer.superUrl, caFile: pgServer.caFile, host: 'localhost', port: pgServer.port },
      mailbox: { ownerUrl: mb.ownerUrl, database: mb.database },
      secrets,
      extension,
      cloudFormation: cfn,
      awsEndpoint: awsServer.url,
      awsEnv: {
        AWS_ENDPOINT_URL: awsServer.url,
        AWS_ENDPOINT_URL_LAMBDA: awsServer.url,
        AWS_ENDPOINT_URL_SCHEDULER: awsServer.url,
        AWS_ENDPOINT_URL_SECRETS_MANAGER: awsServer.url,
        AWS_REGION: REGION,
        AWS_ACCESS_KEY_ID: 'AKIAEMULATEDOPERATOR',
        AWS_SECRET_ACCESS_KEY: 'emulated',
      },
      logDir,
      async upgrade(migration) {
        const next = rebuilt(current, assembly, service, extraAssets, migration);
        current = next.template;
        await cfn.deployStack(service, current);
        return next.migration;
      },
      rotate: (name) => rotate(secrets, pgServer.superUrl, name),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Stacks in the order `cdk deploy` deploys them: each after the stacks the manifest says it depends on. */
function stackOrder(a: CloudAssembly): string[] {
  const m = JSON.parse(readFileSync(join(a.outdir, 'manifest.json'), 'utf8')) as {
    artifacts: Record<string, { type: string; dependencies?: string[] }>;
  };
  const stacks = Object.entries(m.artifacts).filter(([, x]) => x.type === 'aws:cloudformation:stack');
  const out: string[] = [];
  const visit = (name: string) => {
    if (out.includes(name)) return;
    for (const d of m.artifacts[name]?.dependencies ?? []) if (m.artifacts[d]?.type === 'aws:cloudformation:stack') visit(d);
    out.push(name);
  };
  for (const [name] of stacks) visit(name);
  return out;
}

/**
 * A function's environment in the emulated runtime. Paths of the Lambda file system are mapped:
 * /var/task → the asset folder, /var/runtime/ca-cert.pem (the RDS CA bundle) → the test CAs.
 * Kafka: the emulated MSK answers on the shared broker in plaintext, so the settings for MSK's
 * TLS and IAM SASL (MSGX_KAFKA_SSL, MSGX_KAFKA_IAM_REGION) are dropped. The extension listens on a
 * port of its own (one server for every environment), so its port variable is that port.
 */
function functionEnvironment(
  code: FunctionCode,
  token: string,
  o: { caBundle: string; awsEndpoint: string; extension: SecretsExtension },
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(code.environment))
    env[k] = v.startsWith('/var/task') ? code.codeDir + v.slice('/var/task'.length) : v === '/var/runtime/ca-cert.pem' ? o.caBundle : v;
  if (env.MSGX_KAFKA_BROKERS === KAFKA) {
    delete env.MSGX_KAFKA_SSL;
    delete env.MSGX_KAFKA_IAM_REGION;
  }
  if (code.secretsExtension) {
    env.PARAMETERS_SECRETS_EXTENSION_HTTP_PORT = String(o.extension.port);
    o.extension.environments.set(token, { ttlSeconds: Number(env.SECRETS_MANAGER_TTL ?? 300) });
  } else delete env.PARAMETERS_SECRETS_EXTENSION_HTTP_PORT;
  env.AWS_ENDPOINT_URL_LAMBDA = o.awsEndpoint;
  env.AWS_ENDPOINT_URL_SCHEDULER = o.awsEndpoint;
  env.AWS_ENDPOINT_URL_SECRETS_MANAGER = o.awsEndpoint;
  return env;
}

/** The Lambda Invoke API (REST JSON), as the AWS SDK's InvokeCommand calls it. */
async function lambdaInvoke(
  lambda: LambdaService,
  name: string,
  url: URL,
  headers: Record<string, string | string[] | undefined>,
  body: Buffer,
  res: import('node:http').ServerResponse,
): Promise<void> {
  const type = String(headers['x-amz-invocation-type'] ?? 'RequestResponse');
  const qualifier = url.searchParams.get('Qualifier') ?? undefined;
  try {
    const event: unknown = body.length ? JSON.parse(body.toString('utf8')) : {};
    if (type === 'Event') {
      lambda.invokeAsync(name, event, { qualifier });
      return sendJson(res, 202, undefined);
    }
    if (type === 'DryRun') {
      lambda.find(name, qualifier);
      return sendJson(res, 204, undefined);
    }
    const r = await lambda.invoke(name, event, { qualifier });
    sendJson(res, 200, r.payload, {
      'x-amz-executed-version': r.executedVersion,
      ...(r.ok ? {} : { 'x-amz-function-error': 'Unhandled' }),
    });
  } catch (err) {
    if (err instanceof LambdaError)
      return sendJson(res, err.status, { Type: 'User', message: err.message }, { 'x-amzn-errortype': err.type });
    throw err;
  }
}

/** The mailbox: the upstream's MySQL (a private MariaDB serving TLS), its tables, a user for msgx that must use TLS. */
async function startMailbox(dir: string) {
  const tls = join(dir, 'mailbox-tls');
  mkdirSync(tls);
  makeCa(tls, 'ca');
  makeServerCert(tls, 'server', 'ca', 'DNS:localhost,IP:127.0.0.1', 'localhost');
  const instance: MariadbInstance = {
    dir: join(dir, 'mariadb'),
    port: await freePort(),
    args: [`--ssl-ca=${join(tls, 'ca.crt')}`, `--ssl-cert=${join(tls, 'server.crt')}`, `--ssl-key=${join(tls, 'server.key')}`],
  };
  const rootUrl = await mariadbStart(instance);
  const database = 'mailbox';
  const user = 'msgx_mailbox';
  const password = randomBytes(12).toString('base64url');
  const c = await mysql.createConnection({ uri: rootUrl, multipleStatements: true });
  try {
    await c.query(`CREATE DATABASE ${database}`);
    await c.query(`CREATE USER '${user}'@'%' IDENTIFIED BY '${password}' REQUIRE SSL`);
    await c.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${database}.* TO '${user}'@'%'`);
    // The owner's tables, as the upstream system created them (the DDL msgx documents).
    await c.query(`USE ${database}; ${readFileSync(join(REPO, 'migrations', 'mailbox-mysql', '001_mailbox.sql'), 'utf8')}`);
  } finally {
    await c.end();
  }
  return { instance, caFile: join(tls, 'ca.crt'), database, user, password, ownerUrl: `${rootUrl}${database}` };
}

/**
 * The Service template as the next `cdk synth` would write it after a rebuild: every msgx
 * function (MSGX_RUNTIME=lambda) with a new asset of its own (a copy; the migrate bundle with one
 * more numbered migration), and each changed function's version under a new logical id, as CDK's
 * currentVersion names it by a hash of the code.
 */
function rebuilt(
  t: Template,
  a: CloudAssembly,
  stack: string,
  extraAssets: Map<string, string>,
  migration: { label: string; sql: string },
): { template: Template; migration: string } {
  const out = structuredClone(t);
  const renames = new Map<string, string>();
  let migrationName = '';
  for (const [id, r] of Object.entries(out.Resources)) {
    if (r.Type !== 'AWS::Lambda::Function') continue;
    const p = r.Properties as { Code: { S3Key: string }; Environment?: { Variables?: Record<string, unknown> } };
    if (p.Environment?.Variables?.MSGX_RUNTIME !== 'lambda') continue;
    const from = extraAssets.get(p.Code.S3Key) ?? assetDir(a, stack, p.Code.S3Key);
    const hash = randomBytes(32).toString('hex');
    const to = join(a.outdir, `asset.${hash}`);
    cpSync(from, to, { recursive: true });
    writeFileSync(join(to, 'emulated-rebuild.txt'), `${hash}\n`);
    if (id.toLowerCase().startsWith('migratefn')) {
      const last = Math.max(0, ...migrationsOf(to).map((f) => Number(f.split('_')[0])));
      migrationName = `${String(last + 1).padStart(3, '0')}_${migration.label}.sql`;
      writeFileSync(join(to, 'migrations', migrationName), migration.sql);
    }
    extraAssets.set(`${hash}.zip`, to);
    p.Code = { ...p.Code, S3Key: `${hash}.zip` };
    for (const [vid, v] of Object.entries(out.Resources))
      if (v.Type === 'AWS::Lambda::Version' && JSON.stringify(v.Properties?.FunctionName) === JSON.stringify({ Ref: id }))
        renames.set(vid, vid.replace(/[0-9a-f]{32}$/, '') + randomBytes(16).toString('hex'));
  }
  if (!migrationName) throw new Error(`${stack}: no migrate function to carry the migration`);
  let text = JSON.stringify(out);
  for (const [from, to] of renames) text = text.split(`"${from}"`).join(`"${to}"`);
  return { template: JSON.parse(text) as Template, migration: migrationName };
}

/** As the RDS rotation functions do it, with the master's rights (here the superuser's). */
async function rotate(secrets: SecretStore, superUrl: string, name: string): Promise<void> {
  const current = secrets.json(name) as { username: string; password: string; masterarn?: string };
  const password = randomBytes(18).toString('base64url');
  const c = new pg.Client({ connectionString: superUrl });
  await c.connect();
  try {
    let username = current.username;
    if (current.masterarn) {
      // Alternating users: the other of the pair (<user> / <user>_clone) gets the new password.
      username = current.username.endsWith('_clone') ? current.username.slice(0, -'_clone'.length) : `${current.username}_clone`;
      const exists = await c.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [username]);
      if (exists.rowCount === 0) {
        await c.query(`CREATE ROLE ${ident(username)} LOGIN PASSWORD ${literal(password)}`);
        await c.query(`GRANT ${ident(current.username)} TO ${ident(username)}`);
      } else await c.query(`ALTER ROLE ${ident(username)} PASSWORD ${literal(password)}`);
    } else await c.query(`ALTER ROLE ${ident(username)} PASSWORD ${literal(password)}`);
    secrets.put(name, JSON.stringify({ ...current, username, password }));
  } finally {
    await c.end();
  }
}

const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;
const literal = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** Lists a folder's numbered migrations (to name the next one). */
export function migrationsOf(dir: string): string[] {
  return readdirSync(join(dir, 'migrations')).filter((f) => /^\d+_.+\.sql$/.test(f));
}
