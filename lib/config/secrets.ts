import { request } from 'node:http';
import type { SecretsManagerClientConfig } from '@aws-sdk/client-secrets-manager';

/**
 * In the cloud the database URLs and the signing secret come from Secrets Manager (rotated there).
 * Before config is validated, fill MSGX_PG_URL, MSGX_MAILBOX_URL and MSGX_SIGNING_SECRET from the
 * secrets named by *_SECRET_ARN. The database URLs are read again whenever a server refuses the
 * password (`urlSources`, used by lib/db/pg.ts and lib/mailbox/mysql.ts). The twin never needs this.
 *
 * `fresh`: the value must come from Secrets Manager itself, not from a cache (the re-read after a
 * refused login: the cache may still hold the password that was just rotated away).
 */
export type ReadSecret = (arn: string, o?: { fresh?: boolean }) => Promise<string>;

/**
 * Secrets Manager through the AWS SDK. The client is imported on the first read, not with the
 * module: importing it costs ~120 ms, which a cold start with the extension never pays.
 */
export function secretsManagerReader(config: SecretsManagerClientConfig = {}): ReadSecret {
  let send: Promise<(arn: string) => Promise<string | undefined>> | undefined;
  return async (arn) => {
    send ??= import('@aws-sdk/client-secrets-manager').then(({ SecretsManagerClient, GetSecretValueCommand }) => {
      const client = new SecretsManagerClient(config);
      return async (id: string) => (await client.send(new GetSecretValueCommand({ SecretId: id }))).SecretString;
    });
    send.catch(() => (send = undefined));
    const value = await (await send)(arn);
    if (!value) throw new Error(`secret ${arn} has no string value`);
    return value;
  };
}

/**
 * The AWS Parameters and Secrets Lambda Extension: a local HTTP server in the Lambda environment
 * that reads secrets with the function's role and caches them (SECRETS_MANAGER_TTL). GET
 * /secretsmanager/get?secretId=… with the session token; the answer is GetSecretValue's JSON.
 */
export function extensionReader(o: { port: number; token: string; host?: string; timeoutMs?: number }): ReadSecret {
  const host = o.host ?? 'localhost';
  const timeoutMs = o.timeoutMs ?? 3000;
  return (arn) =>
    new Promise<string>((resolve, reject) => {
      const req = request(
        {
          host,
          port: o.port,
          path: `/secretsmanager/get?secretId=${encodeURIComponent(arn)}`,
          headers: { 'X-Aws-Parameters-Secrets-Token': o.token },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const body = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode !== 200)
              return reject(new Error(`secrets extension answered ${res.statusCode} for ${arn}: ${body.slice(0, 300)}`));
            try {
              const value = (JSON.parse(body) as { SecretString?: unknown }).SecretString;
              if (typeof value !== 'string' || !value) throw new Error('no SecretString');
              resolve(value);
            } catch (err) {
              reject(new Error(`secrets extension: unusable answer for ${arn} (${(err as Error).message})`));
            }
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`secrets extension did not answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end();
    });
}

/**
 * How a function reads its secrets: through the extension when the function has it
 * (PARAMETERS_SECRETS_EXTENSION_HTTP_PORT, set with the layer, and the session token), else — or if
 * the extension fails, or a `fresh` value is asked for — from Secrets Manager through the SDK.
 */
export function lambdaSecretReader(env: Env = process.env, o: { sdk?: ReadSecret; extension?: ReadSecret } = {}): ReadSecret {
  const sdk = o.sdk ?? secretsManagerReader();
  const port = Number(env.PARAMETERS_SECRETS_EXTENSION_HTTP_PORT);
  const token = env.AWS_SESSION_TOKEN;
  const extension = o.extension ?? (port > 0 && token ? extensionReader({ port, token }) : undefined);
  return async (arn, ro) => {
    if (!extension || ro?.fresh) return sdk(arn, ro);
    let viaExtension: unknown;
    try {
      return await extension(arn);
    } catch (err) {
      viaExtension = err;
    }
    try {
      return await sdk(arn);
    } catch (err) {
      throw new Error(
        `secret ${arn}: the secrets extension failed (${(viaExtension as Error).message}) and so did Secrets Manager: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
  };
}

type Env = Record<string, string | undefined>;

export interface UrlSources {
  /** Current MSGX_PG_URL, re-assembled from the secret. */
  pg?: () => Promise<string>;
  /** Current MSGX_MAILBOX_URL, re-assembled from the secret. */
  mailbox?: () => Promise<string>;
}

/**
 * Functions that read the database secrets and assemble the URLs; absent where the URL was given
 * directly. `fresh` for the re-read after a refused login (bypasses the extension's cache).
 */
export function urlSources(env: Env, read: ReadSecret, readOptions: { fresh?: boolean } = {}): UrlSources {
  /** The URL of one database: its secret, with host, port and database name where the environment sets them. */
  const fromSecret =
    (scheme: 'postgres' | 'mysql', arn: string, at: { host?: string; port?: string; db?: string }, tls?: { caFile?: string }) => async () =>
      urlFromSecret(scheme, withPort(parseSecret(arn, await read(arn, readOptions)), at.port), at.host, at.db, tls);
  const out: UrlSources = {};
  const pgArn = env.MSGX_PG_SECRET_ARN;
  const mbArn = env.MSGX_MAILBOX_SECRET_ARN;
  if (pgArn && !env.MSGX_PG_URL)
    out.pg = fromSecret(
      'postgres',
      pgArn,
      { host: env.MSGX_PG_HOST, port: env.MSGX_PG_PORT, db: env.MSGX_PG_DB },
      { caFile: env.MSGX_PG_SSL_CA },
    );
  if (mbArn && !env.MSGX_MAILBOX_URL)
    out.mailbox = fromSecret('mysql', mbArn, { host: env.MSGX_MAILBOX_HOST, port: env.MSGX_MAILBOX_PORT, db: env.MSGX_MAILBOX_DB });
  return out;
}

export async function resolveSecretEnv(env: Env, read: ReadSecret = lambdaSecretReader()): Promise<Env> {
  const out = { ...env };
  const sources = urlSources(env, read);
  if (sources.pg) out.MSGX_PG_URL = await sources.pg();
  if (sources.mailbox) out.MSGX_MAILBOX_URL = await sources.mailbox();
  if (env.MSGX_SIGNING_SECRET_ARN && !env.MSGX_SIGNING_SECRET) out.MSGX_SIGNING_SECRET = await read(env.MSGX_SIGNING_SECRET_ARN);
  return out;
}

/** Migrate only: the functions' user and password (MSGX_PG_APP_SECRET_ARN), to create it. */
export async function appUserFromSecret(
  env: Env,
  read: ReadSecret = lambdaSecretReader(),
): Promise<{ username: string; password: string } | undefined> {
  const arn = env.MSGX_PG_APP_SECRET_ARN;
  if (!arn) return undefined;
  const s = parseSecret(arn, await read(arn));
  return { username: s.username, password: s.password };
}

interface DbSecret {
  username: string;
  password: string;
  host?: string;
  port?: number;
  dbname?: string;
}

/** The secret's port wins; a secret without one (not written by RDS) takes the environment's. */
function withPort(s: DbSecret, envPort: string | undefined): DbSecret {
  return s.port || !envPort ? s : { ...s, port: Number(envPort) };
}

function parseSecret(arn: string, text: string): DbSecret {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new Error(`secret ${arn} is not JSON {username, password}`);
  }
  const s = v as Partial<DbSecret>;
  if (typeof s?.username !== 'string' || typeof s.password !== 'string')
    throw new Error(`secret ${arn} needs string fields username and password`);
  return s as DbSecret;
}

/**
 * RDS-style secret JSON → URL; host and database from the environment win (proxy endpoints).
 * PostgreSQL is always `sslmode=verify-full`: the certificate must chain to a trusted CA (the RDS
 * bundle through NODE_EXTRA_CA_CERTS, or `caFile` as sslrootcert) and name the host.
 */
export function urlFromSecret(
  scheme: 'postgres' | 'mysql',
  s: DbSecret,
  host?: string,
  db?: string,
  tls: { caFile?: string } = {},
): string {
  const u = new URL(`${scheme}://placeholder`);
  u.username = encodeURIComponent(s.username);
  u.password = encodeURIComponent(s.password);
  u.hostname = host ?? s.host ?? 'localhost';
  if (s.port) u.port = String(s.port);
  u.pathname = `/${db ?? s.dbname ?? (scheme === 'postgres' ? 'postgres' : '')}`;
  if (scheme === 'postgres') {
    u.searchParams.set('sslmode', 'verify-full');
    if (tls.caFile) u.searchParams.set('sslrootcert', tls.caFile);
  }
  return u.toString();
}
