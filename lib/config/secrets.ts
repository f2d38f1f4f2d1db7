import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

/**
 * In the cloud the database URLs and the signing secret come from Secrets Manager (rotated there).
 * Before config is validated, fill MSGX_PG_URL, MSGX_MAILBOX_URL and MSGX_SIGNING_SECRET from the
 * secrets named by *_SECRET_ARN, once per cold start. The twin never needs this.
 */
export async function resolveSecretEnv(env: Record<string, string | undefined>): Promise<Record<string, string | undefined>> {
  const out = { ...env };
  const wanted = [env.MSGX_PG_SECRET_ARN, env.MSGX_MAILBOX_SECRET_ARN, env.MSGX_SIGNING_SECRET_ARN].filter(Boolean);
  if (wanted.length === 0) return out;
  const client = new SecretsManagerClient({});
  const read = async (arn: string) => {
    const r = await client.send(new GetSecretValueCommand({ SecretId: arn }));
    if (!r.SecretString) throw new Error(`secret ${arn} has no string value`);
    return r.SecretString;
  };
  if (env.MSGX_PG_SECRET_ARN && !env.MSGX_PG_URL)
    out.MSGX_PG_URL = urlFromSecret('postgres', JSON.parse(await read(env.MSGX_PG_SECRET_ARN)), env.MSGX_PG_HOST, env.MSGX_PG_DB);
  if (env.MSGX_MAILBOX_SECRET_ARN && !env.MSGX_MAILBOX_URL)
    out.MSGX_MAILBOX_URL = urlFromSecret('mysql', JSON.parse(await read(env.MSGX_MAILBOX_SECRET_ARN)), env.MSGX_MAILBOX_HOST, env.MSGX_MAILBOX_DB);
  if (env.MSGX_SIGNING_SECRET_ARN && !env.MSGX_SIGNING_SECRET) out.MSGX_SIGNING_SECRET = await read(env.MSGX_SIGNING_SECRET_ARN);
  return out;
}

interface DbSecret {
  username: string;
  password: string;
  host?: string;
  port?: number;
  dbname?: string;
}

/** RDS-style secret JSON → URL; host and database from the environment win (proxy endpoints). */
export function urlFromSecret(scheme: 'postgres' | 'mysql', s: DbSecret, host?: string, db?: string): string {
  const u = new URL(`${scheme}://placeholder`);
  u.username = encodeURIComponent(s.username);
  u.password = encodeURIComponent(s.password);
  u.hostname = host ?? s.host ?? 'localhost';
  if (s.port) u.port = String(s.port);
  u.pathname = `/${db ?? s.dbname ?? (scheme === 'postgres' ? 'postgres' : '')}`;
  if (scheme === 'postgres') u.searchParams.set('sslmode', 'no-verify');
  return u.toString();
}
