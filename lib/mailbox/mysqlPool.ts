import { isIP } from 'node:net';
import mysql from 'mysql2/promise';
import { retryOnAuthFailure } from '../config/credentials.ts';

export interface MysqlPoolOptions {
  connectionLimit?: number;
  /**
   * Verify the server's certificate against this CA bundle (PEM) and its host name. `caFile`
   * (where the bundle was read from) only names it in errors.
   */
  ssl?: { ca: string | Buffer; caFile?: string };
  /** Re-reads the URL when the server refuses the password (ER_ACCESS_DENIED_ERROR, 1045). */
  refreshUrl?: () => Promise<string>;
  authRetryDelaysMs?: number[];
}

export function isMysqlAuthError(err: unknown): boolean {
  const e = err as { code?: unknown; errno?: unknown } | null;
  return e?.code === 'ER_ACCESS_DENIED_ERROR' || e?.errno === 1045;
}

/**
 * The pool options msgx uses for the mailbox (exported so tests can check the TLS settings).
 * With TLS the host must be a DNS name: mysql2 sends no server name for an IP address, and Node
 * then checks the certificate against "localhost" instead of the address, so an IP could never be
 * verified as the host it is; that is refused rather than half-verified.
 */
export function mysqlPoolConfig(url: string, o: MysqlPoolOptions): mysql.PoolOptions {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (o.ssl && isIP(host))
    throw new MailboxTlsError(
      `mailbox TLS: ${host} is an IP address, but the certificate can only be checked against a host name: set MSGX_MAILBOX_HOST to the server's DNS name (the one its certificate is issued for)`,
    );
  return {
    uri: url,
    connectionLimit: o.connectionLimit ?? 5,
    timezone: 'Z',
    dateStrings: false,
    supportBigNumbers: true,
    bigNumberStrings: false,
    connectTimeout: 5000,
    enableKeepAlive: true,
    multipleStatements: false,
    // rejectUnauthorized: the chain must end at the bundle's CA. mysql2 checks the host name
    // (DNS name or IP against the certificate's subjectAltName) only with verifyIdentity.
    ...(o.ssl ? { ssl: { ca: o.ssl.ca, rejectUnauthorized: true, verifyIdentity: true } } : {}),
  };
}

/** The mailbox server could not be verified over TLS: untrusted chain, other host name, or no TLS. */
export class MailboxTlsError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'MailboxTlsError';
  }
}

/**
 * mysql2 reports a failed TLS handshake as HANDSHAKE_SSL_ERROR (Node's reason in the message:
 * untrusted chain, expired, other host name) and a server without TLS as HANDSHAKE_NO_SSL_SUPPORT.
 */
function isTlsError(err: unknown): err is Error & { code: string } {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'HANDSHAKE_SSL_ERROR' || code === 'HANDSHAKE_NO_SSL_SUPPORT';
}

/** Names the server and the CA bundle in a TLS failure, so the log line says what to fix. */
function explainTls(err: unknown, url: string, o: MysqlPoolOptions): unknown {
  if (!o.ssl || !isTlsError(err)) return err;
  const u = new URL(url);
  const where = `${u.hostname}:${u.port || '3306'}`;
  const bundle = o.ssl.caFile ? ` (CA bundle ${o.ssl.caFile}, MSGX_MAILBOX_SSL_CA)` : '';
  const why =
    err.code === 'HANDSHAKE_NO_SSL_SUPPORT'
      ? 'the server does not offer TLS'
      : /altnames|hostname|host name/i.test(err.message)
        ? `its certificate is not issued for the host name ${u.hostname}`
        : /certificate|self[- ]signed|issuer/i.test(err.message)
          ? 'its certificate cannot be verified against the CA bundle'
          : 'the TLS handshake failed';
  return new MailboxTlsError(`mailbox TLS: refused ${where}: ${why}${bundle}: ${err.message}`, err);
}

/**
 * The slice of a mysql2 pool the mailbox uses (query, execute, end), rebuilt on a fresh URL when a
 * login is refused. A refused login fails before the statement is sent, so repeating the call is
 * safe.
 */
export function refreshingPool(url: string, o: MysqlPoolOptions): Pick<mysql.Pool, 'query' | 'execute' | 'end'> {
  let current = url;
  let pool = mysql.createPool(mysqlPoolConfig(current, o));
  let refreshing: Promise<void> | undefined;
  const refresh = o.refreshUrl;
  const swap = async () => {
    current = await refresh!();
    const old = pool;
    pool = mysql.createPool(mysqlPoolConfig(current, o));
    void old.end().catch(() => {});
  };
  const run = <T>(attempt: () => Promise<T>): Promise<T> =>
    (refresh
      ? retryOnAuthFailure(attempt, {
          isAuthError: isMysqlAuthError,
          delaysMs: o.authRetryDelaysMs,
          refresh: () => (refreshing ??= swap().finally(() => (refreshing = undefined))),
        })
      : attempt()
    ).catch((err: unknown) => {
      throw explainTls(err, current, o);
    });
  return {
    query: ((...args: Parameters<mysql.Pool['query']>) =>
      run(() => (pool.query as (...a: unknown[]) => Promise<unknown>)(...args))) as mysql.Pool['query'],
    execute: ((...args: Parameters<mysql.Pool['execute']>) =>
      run(() => (pool.execute as (...a: unknown[]) => Promise<unknown>)(...args))) as mysql.Pool['execute'],
    end: () => pool.end(),
  };
}
