import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Local stand-ins for the two ways a function reads a secret, speaking their real HTTP protocols
 * so msgx's own clients are exercised: the AWS Parameters and Secrets Lambda Extension (GET
 * /secretsmanager/get, session-token header, a TTL cache like the real one) and the Secrets
 * Manager API the AWS SDK calls (JSON 1.1, `secretsmanager.GetSecretValue`).
 */
export interface SecretStore {
  /** The current (AWSCURRENT) value of each secret, as a rotation would change it. */
  values: Map<string, string>;
}

export interface FakeSecretsManager {
  endpoint: string;
  /** GetSecretValue calls answered, by secret id. */
  calls: string[];
  /** SDK client settings that reach this server (any credentials sign; nothing checks them). */
  sdkConfig: { endpoint: string; region: string; credentials: { accessKeyId: string; secretAccessKey: string }; maxAttempts: number };
  close(): Promise<void>;
}

export interface FakeExtension {
  port: number;
  token: string;
  /** Requests answered (from the cache or not), by secret id. */
  requests: string[];
  /** Reads of the store (cache misses), by secret id. */
  fetches: string[];
  /** Forget the cache (a new execution environment). */
  clear(): void;
  close(): Promise<void>;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

const close = (server: Server) => () =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function fakeSecretsManager(store: SecretStore): Promise<FakeSecretsManager> {
  const calls: string[] = [];
  const server = createServer(async (req, res) => {
    const target = req.headers['x-amz-target'];
    const input = JSON.parse((await body(req)) || '{}') as { SecretId?: string };
    const reply = (status: number, payload: unknown) => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify(payload));
    };
    if (req.method !== 'POST' || target !== 'secretsmanager.GetSecretValue')
      return reply(400, { __type: 'UnknownOperationException', message: `unexpected ${req.method} ${String(target)}` });
    const id = input.SecretId ?? '';
    calls.push(id);
    const value = store.values.get(id);
    if (value === undefined)
      return reply(400, { __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." });
    reply(200, {
      ARN: id,
      Name: id.split(':').pop(),
      SecretString: value,
      VersionId: `v${calls.length}`,
      VersionStages: ['AWSCURRENT'],
      CreatedDate: 1_700_000_000,
    });
  });
  const port = await listen(server);
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    calls,
    sdkConfig: { endpoint, region: 'eu-west-1', credentials: { accessKeyId: 'AKIDFAKE', secretAccessKey: 'fake' }, maxAttempts: 1 },
    close: close(server),
  };
}

/**
 * The extension: answers from its cache for `ttlMs` after a read (the real default is 300 s), so
 * a rotated password is not seen through it until the entry expires.
 */
export async function fakeSecretsExtension(store: SecretStore, o: { ttlMs?: number; token?: string } = {}): Promise<FakeExtension> {
  const token = o.token ?? 'session-token-of-the-function';
  const ttlMs = o.ttlMs ?? 300_000;
  const cache = new Map<string, { value: string; until: number }>();
  const requests: string[] = [];
  const fetches: string[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (req.headers['x-aws-parameters-secrets-token'] !== token) {
      res.writeHead(401).end('missing or wrong X-Aws-Parameters-Secrets-Token');
      return;
    }
    const id = url.searchParams.get('secretId') ?? '';
    if (req.method !== 'GET' || url.pathname !== '/secretsmanager/get' || !id) {
      res.writeHead(400).end('bad request');
      return;
    }
    requests.push(id);
    let entry = cache.get(id);
    if (!entry || entry.until < Date.now()) {
      fetches.push(id);
      const value = store.values.get(id);
      if (value === undefined) {
        res.writeHead(400).end("ResourceNotFoundException: Secrets Manager can't find the specified secret.");
        return;
      }
      entry = { value, until: Date.now() + ttlMs };
      cache.set(id, entry);
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({ ARN: id, Name: id.split(':').pop(), SecretString: entry.value, VersionId: 'v1', VersionStages: ['AWSCURRENT'] }),
    );
  });
  return { port: await listen(server), token, requests, fetches, clear: () => cache.clear(), close: close(server) };
}

export interface FakeLambda {
  endpoint: string;
  /** Asynchronous invocations received: function name and invocation type. */
  invocations: { functionName: string; type: string }[];
  close(): Promise<void>;
}

/** The Lambda Invoke API (POST /2015-03-31/functions/<name>/invocations), answering 202 to Event. */
export async function fakeLambda(): Promise<FakeLambda> {
  const invocations: FakeLambda['invocations'] = [];
  const server = createServer(async (req, res) => {
    await body(req);
    const m = /^\/2015-03-31\/functions\/([^/]+)\/invocations/.exec(req.url ?? '');
    if (req.method !== 'POST' || !m) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"Type":"User","message":"unexpected request"}');
      return;
    }
    invocations.push({ functionName: decodeURIComponent(m[1]!), type: String(req.headers['x-amz-invocation-type'] ?? 'RequestResponse') });
    res.writeHead(202, { 'x-amz-executed-version': '$LATEST' }).end();
  });
  const port = await listen(server);
  return { endpoint: `http://127.0.0.1:${port}`, invocations, close: close(server) };
}
