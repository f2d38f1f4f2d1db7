import { randomBytes, randomInt } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { listen, type Listening, sendJson } from './http.ts';

export interface Secret {
  arn: string;
  name: string;
  value: string;
  versionId: string;
}

/** Secrets Manager's store: secrets by ARN and by name; put() is how a rotation changes a value. */
export class SecretStore {
  private readonly byArn = new Map<string, Secret>();
  /** GetSecretValue calls through the SDK (not the extension), by ARN. */
  readonly apiReads: string[] = [];

  constructor(private readonly prefix: string) {}

  /** A new secret: ARN as Secrets Manager makes it, the name and six random characters. */
  create(name: string, value: string, arn = `${this.prefix}:secret:${name}-${randomBytes(4).toString('base64url').slice(0, 6)}`): Secret {
    const s = { arn, name, value, versionId: randomBytes(16).toString('hex') };
    this.byArn.set(arn, s);
    return s;
  }

  get(id: string): Secret | undefined {
    return this.byArn.get(id) ?? [...this.byArn.values()].find((s) => s.name === id);
  }

  json(id: string): Record<string, unknown> {
    return JSON.parse(this.require(id).value) as Record<string, unknown>;
  }

  put(id: string, value: string): void {
    const s = this.require(id);
    s.value = value;
    s.versionId = randomBytes(16).toString('hex');
  }

  require(id: string): Secret {
    const s = this.get(id);
    if (!s) throw new Error(`no secret ${id}`);
    return s;
  }

  /** secretsmanager.GetSecretValue (JSON 1.1), as the AWS SDK calls it. */
  handleApi(target: string, input: { SecretId?: string }, res: ServerResponse): void {
    if (target !== 'secretsmanager.GetSecretValue')
      return sendJson(res, 400, { __type: 'UnknownOperationException', message: `${target} is not emulated` });
    const s = this.get(input.SecretId ?? '');
    this.apiReads.push(input.SecretId ?? '');
    if (!s) return sendJson(res, 400, { __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." });
    sendJson(res, 200, this.answer(s), { 'content-type': 'application/x-amz-json-1.1' });
  }

  answer(s: Secret): Record<string, unknown> {
    return {
      ARN: s.arn,
      Name: s.name,
      SecretString: s.value,
      VersionId: s.versionId,
      VersionStages: ['AWSCURRENT'],
      CreatedDate: Math.floor(Date.now() / 1000),
    };
  }
}

/** GenerateSecretString of AWS::SecretsManager::Secret: a password, alone or as a key of the template JSON. */
export function generateSecretString(g: {
  PasswordLength?: number;
  ExcludeCharacters?: string;
  ExcludePunctuation?: boolean;
  IncludeSpace?: boolean;
  SecretStringTemplate?: string;
  GenerateStringKey?: string;
}): string {
  const punctuation = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';
  let alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  if (!g.ExcludePunctuation) alphabet += punctuation;
  if (g.IncludeSpace) alphabet += ' ';
  const allowed = [...alphabet].filter((c) => !(g.ExcludeCharacters ?? '').includes(c));
  const password = Array.from({ length: g.PasswordLength ?? 32 }, () => allowed[randomInt(allowed.length)]).join('');
  if (!g.SecretStringTemplate) return password;
  return JSON.stringify({ ...(JSON.parse(g.SecretStringTemplate) as object), [g.GenerateStringKey ?? 'password']: password });
}

export interface ExtensionEnvironment {
  /** SECRETS_MANAGER_TTL of the environment, seconds. */
  ttlSeconds: number;
}

/**
 * The AWS Parameters and Secrets Lambda Extension. In Lambda each execution environment has its
 * own on localhost; here one server answers every environment, told apart by the session token
 * (X-Aws-Parameters-Secrets-Token must be the environment's AWS_SESSION_TOKEN, else 401), each
 * with a cache of its own that keeps a value for the environment's SECRETS_MANAGER_TTL.
 */
export class SecretsExtension {
  readonly environments = new Map<string, ExtensionEnvironment>();
  private readonly caches = new Map<string, Map<string, { body: Record<string, unknown>; until: number }>>();
  /** Requests answered, by secret id. */
  readonly requests: string[] = [];
  private server?: Listening;

  constructor(private readonly store: SecretStore) {}

  get port(): number {
    return this.server!.port;
  }

  async start(): Promise<void> {
    this.server = await listen((req, res) => this.handle(req, res));
  }

  async close(): Promise<void> {
    await this.server?.close();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const token = req.headers['x-aws-parameters-secrets-token'];
    const env = typeof token === 'string' ? this.environments.get(token) : undefined;
    if (!env) return void res.writeHead(401).end('missing or wrong X-Aws-Parameters-Secrets-Token');
    const url = new URL(req.url ?? '/', 'http://localhost');
    const id = url.searchParams.get('secretId') ?? '';
    if (req.method !== 'GET' || url.pathname !== '/secretsmanager/get' || !id) return void res.writeHead(400).end('bad request');
    this.requests.push(id);
    let cache = this.caches.get(token as string);
    if (!cache) this.caches.set(token as string, (cache = new Map()));
    let hit = cache.get(id);
    if (!hit || hit.until < Date.now()) {
      const s = this.store.get(id);
      if (!s) return void res.writeHead(400).end("ResourceNotFoundException: Secrets Manager can't find the specified secret.");
      hit = { body: this.store.answer(s), until: Date.now() + env.ttlSeconds * 1000 };
      cache.set(id, hit);
    }
    sendJson(res, 200, hit.body);
  }
}
