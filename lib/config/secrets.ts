import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

/**
 * In the cloud the database URLs and the signing secret come from Secrets Manager (rotated there).
 * Before config is validated, fill MSGX_PG_URL, MSGX_MAILBOX_URL and MSGX_SIGNING_SECRET from the
 * secrets named by *_SECRET_ARN. The database URLs are read again whenever a server refuses the
 * password (`urlSources`, used by lib/db/pg.ts and lib/mailbox/mysql.ts). The twin never needs this.
 */
export type ReadSecret = (arn: string) => Promise<string>;

/** The Secrets Manager port: the current (AWSCURRENT) string value of a secret. */
export function secretsManagerReader(): ReadSecret {
  let client: SecretsManagerClient | undefined;
  return async (arn) => {
    client ??= new SecretsManagerClient({});
    const r = await client.send(new GetSecretValueCommand({ SecretId: arn }));
    if (!r.SecretString) throw new Error(`secret ${arn} has no string value`);
    return r.SecretString;
  };
}

type Env = Record<string, string | undefined>;

export interface UrlSources {
  /** Current MSGX_PG_URL, re-assembled from the secret. */
  pg?: () => Promise<string>;
  /** Current MSGX_MAILBOX_URL, re-assembled from the secret. */
  mailbox?: () => Promise<string>;
}

/** Functions that re-read the database secrets; absent where the URL was given directly. */
export function urlSources(env: Env, read: ReadSecret): UrlSources {
  const out: UrlSources = {};
  const pgArn = env.MSGX_PG_SECRET_ARN;
  const mbArn = env.MSGX_MAILBOX_SECRET_ARN;
  if (pgArn && !env.MSGX_PG_URL)
    out.pg = async () =>
      urlFromSecret('postgres', withPort(parseSecret(pgArn, await read(pgArn)), env.MSGX_PG_PORT), env.MSGX_PG_HOST, env.MSGX_PG_DB, {
        caFile: env.MSGX_PG_SSL_CA,
      });
  if (mbArn && !env.MSGX_MAILBOX_URL)
    out.mailbox = async () =>
      urlFromSecret('mysql', withPort(parseSecret(mbArn, await read(mbArn)), env.MSGX_MAILBOX_PORT), env.MSGX_MAILBOX_HOST, env.MSGX_MAILBOX_DB);
  return out;
}

export async function resolveSecretEnv(env: Env, read: ReadSecret = secretsManagerReader()): Promise<Env> {
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
  read: ReadSecret = secretsManagerReader(),
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
