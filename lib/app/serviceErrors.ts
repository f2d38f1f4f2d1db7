import { ConfigError } from '../shared/errors.ts';

/** The settings that point msgx at a service it must reach to start. */
export type ServiceSetting = 'MSGX_PG_URL' | 'MSGX_MAILBOX_URL' | 'MSGX_KAFKA_BROKERS';

const SERVICE: Record<ServiceSetting, string> = {
  MSGX_PG_URL: 'PostgreSQL',
  MSGX_MAILBOX_URL: 'the MySQL/MariaDB mailbox',
  MSGX_KAFKA_BROKERS: 'Kafka',
};

/**
 * Runs a start-up step that reaches the service `setting` points at. A failure the user has to fix
 * (no such database, a refused login, nothing listening, an unknown host) becomes a ConfigError of
 * one line naming the setting, the target (host:port/database, never the password), the reason
 * and what to do; the driver's error stays its `cause`. Anything else passes through unchanged.
 */
export async function reaching<T>(setting: ServiceSetting, target: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    throw unreachable(err, setting, target) ?? err;
  }
}

/** The ConfigError for `err`, or undefined when it is not one the user fixes in `setting`. */
export function unreachable(err: unknown, setting: ServiceSetting, target: string): ConfigError | undefined {
  const found = diagnose(err, setting);
  if (!found) return undefined;
  const where = `${SERVICE[setting]} at ${targetOf(target)}`;
  return new ConfigError(`${setting}: cannot use ${where}: ${found.reason}; ${found.fix}`, { cause: err });
}

function diagnose(err: unknown, setting: ServiceSetting): { reason: string; fix: string } | undefined {
  const chain = causes(err);
  const codes = chain.map((e) => (e as { code?: unknown }).code);
  const first = (pred: (code: unknown) => boolean) => chain[codes.findIndex(pred)];
  const correct = `or correct ${setting}`;
  const noDb = first((c) => c === '3D000' || c === 'ER_BAD_DB_ERROR');
  if (noDb) return { reason: `${noDb.message} (${codeOf(noDb)})`, fix: `create the database ${correct}` };
  const login = first((c) => c === '28P01' || c === '28000' || c === 'ER_ACCESS_DENIED_ERROR');
  if (login) return { reason: `login refused: ${login.message} (${codeOf(login)})`, fix: `check the user and password in ${setting}` };
  const running = setting === 'MSGX_KAFKA_BROKERS' ? 'is the broker running?' : 'is the database server running?';
  const refused = first((c) => c === 'ECONNREFUSED' || c === 'ECONNRESET' || c === 'ETIMEDOUT' || c === 'EHOSTUNREACH');
  if (refused) return { reason: `${NO_CONNECTION[codeOf(refused)]} (${codeOf(refused)})`, fix: `${running} start it ${correct}` };
  const host = first((c) => c === 'ENOTFOUND' || c === 'EAI_AGAIN');
  if (host) return { reason: `unknown host (${codeOf(host)})`, fix: `correct the host in ${setting}` };
  // A broker that never answers (a timeout) carries no errno; KafkaJS still says it was the connection.
  const kafka = chain.find((e) => e.name === 'KafkaJSConnectionError');
  if (kafka) return { reason: kafka.message, fix: `${running} start it ${correct}` };
  return undefined;
}

/** `err` and the errors it was caused by (KafkaJS wraps the socket's error two levels deep). */
function causes(err: unknown): Error[] {
  const out: Error[] = [];
  for (let e = err; e instanceof Error && out.length < 10; e = e.cause) out.push(e);
  return out;
}

const NO_CONNECTION: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
};

const codeOf = (e: Error) => String((e as { code?: unknown }).code);

/** host:port/database of a URL without its user and password; a broker list as it is. */
function targetOf(target: string): string {
  if (!target.includes('://')) return target;
  try {
    const u = new URL(target);
    const port = u.port || (u.protocol.startsWith('postgres') ? '5432' : '3306');
    return `${u.hostname}:${port}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return '(unparsable URL)';
  }
}
