import mysql from 'mysql2/promise';
import { retryOnAuthFailure } from '../config/credentials.ts';

export interface MysqlPoolOptions {
  connectionLimit?: number;
  /** Verify the server's certificate against this CA bundle (PEM) and its host name. */
  ssl?: { ca: string | Buffer };
  /** Re-reads the URL when the server refuses the password (ER_ACCESS_DENIED_ERROR, 1045). */
  refreshUrl?: () => Promise<string>;
  authRetryDelaysMs?: number[];
}

export function isMysqlAuthError(err: unknown): boolean {
  const e = err as { code?: unknown; errno?: unknown } | null;
  return e?.code === 'ER_ACCESS_DENIED_ERROR' || e?.errno === 1045;
}

/** The pool options msgx uses for the mailbox (exported so tests can check the TLS settings). */
export function mysqlPoolConfig(url: string, o: MysqlPoolOptions): mysql.PoolOptions {
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
    // rejectUnauthorized also checks the host name against the certificate (Node's default).
    ...(o.ssl ? { ssl: { ca: o.ssl.ca, rejectUnauthorized: true } } : {}),
  };
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
    refresh
      ? retryOnAuthFailure(attempt, {
          isAuthError: isMysqlAuthError,
          delaysMs: o.authRetryDelaysMs,
          refresh: () => (refreshing ??= swap().finally(() => (refreshing = undefined))),
        })
      : attempt();
  return {
    query: ((...args: Parameters<mysql.Pool['query']>) => run(() => (pool.query as (...a: unknown[]) => Promise<unknown>)(...args))) as mysql.Pool['query'],
    execute: ((...args: Parameters<mysql.Pool['execute']>) =>
      run(() => (pool.execute as (...a: unknown[]) => Promise<unknown>)(...args))) as mysql.Pool['execute'],
    end: () => pool.end(),
  };
}
