import pg from 'pg';
import { retryOnAuthFailure } from '../config/credentials.ts';
import type { Db, Queryable, QueryResult, Session } from './db.ts';
import { type ListenOptions, type LocalWake, LocalWakes } from './localWake.ts';
import { isStalePlan, queryConfig } from './prepared.ts';

// int8 (ids, counts) as JS numbers: ids stay far below 2^53, and numbers keep the code simple.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));

export interface PgDbOptions {
  max?: number;
  /** Below the function timeout, so a frozen statement never holds a lock for long. */
  statementTimeoutMs?: number;
  idleInTransactionTimeoutMs?: number;
  applicationName?: string;
  /**
   * Re-reads the connection URL (Secrets Manager in the cloud). Called when the server refuses
   * the password (SQLSTATE 28P01/28000, e.g. after a rotation): the pool is rebuilt on the new URL
   * and the connection attempt retried, without a cold start.
   */
  refreshUrl?: () => Promise<string>;
  /** Waits before each re-read after an authentication failure (default 0, 1 s, 2 s, 4 s). */
  authRetryDelaysMs?: number[];
}

/** SQLSTATE of a refused login: invalid_password, invalid_authorization_specification. */
export function isPgAuthError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '28P01' || code === '28000';
}

/**
 * Server-side TCP keepalives and timeouts on every session: a worker killed mid-transaction or cut
 * off by the network loses its locks within seconds instead of the kernel's two hours.
 */
function sessionSettings(o: PgDbOptions): string {
  const stmt = o.statementTimeoutMs ?? 60_000;
  const idle = o.idleInTransactionTimeoutMs ?? 30_000;
  // Sent in the startup packet: in force before the first query, no extra round trip.
  return [
    `-c tcp_keepalives_idle=5`,
    `-c tcp_keepalives_interval=2`,
    `-c tcp_keepalives_count=3`,
    `-c statement_timeout=${Math.floor(stmt)}`,
    `-c idle_in_transaction_session_timeout=${Math.floor(idle)}`,
  ].join(' ');
}

export class PgDb implements Db {
  readonly kind = 'pg' as const;
  #pool: pg.Pool;
  #url: string;
  readonly #settings: string;
  readonly #appName: string;
  readonly #max: number;
  readonly #options: PgDbOptions;
  #refreshing: Promise<void> | undefined;
  readonly #wakes = new LocalWakes();

  constructor(url: string, options: PgDbOptions = {}) {
    this.#url = url;
    this.#options = options;
    this.#settings = sessionSettings(options);
    this.#appName = options.applicationName ?? 'msgx';
    this.#max = options.max ?? 10;
    this.#pool = this.#newPool();
  }

  get pool(): pg.Pool {
    return this.#pool;
  }

  #newPool(): pg.Pool {
    const pool = new pg.Pool({
      connectionString: this.#url,
      max: this.#max,
      application_name: this.#appName,
      keepAlive: true,
      options: this.#settings,
    });
    // An idle client that dies (server restart) must not crash the process.
    pool.on('error', () => {});
    return pool;
  }

  /**
   * Runs `attempt` (which opens a connection before it sends anything, so a retry never repeats a
   * statement); on a refused login, re-reads the URL once for all concurrent callers and retries.
   */
  #authRetry<T>(attempt: () => Promise<T>): Promise<T> {
    const refresh = this.#options.refreshUrl;
    if (!refresh) return attempt();
    return retryOnAuthFailure(attempt, {
      isAuthError: isPgAuthError,
      delaysMs: this.#options.authRetryDelaysMs,
      refresh: () => (this.#refreshing ??= this.#swap(refresh).finally(() => (this.#refreshing = undefined))),
    });
  }

  async #swap(refresh: () => Promise<string>): Promise<void> {
    this.#url = await refresh();
    const old = this.#pool;
    this.#pool = this.#newPool();
    // Clients already checked out finish their work on the old pool; its idle ones close now.
    void old.end().catch(() => {});
  }

  async query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    // A refused login fails before the statement is sent: retrying the whole query is safe.
    // A failed query's connection leaves the pool (pg-pool), a stale prepared plan with it.
    return shape<T>(await this.#authRetry(() => this.#pool.query(queryConfig(sql, params))));
  }

  async tx<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.#authRetry(() => this.#pool.connect());
    let broken = false;
    // pg-pool stops listening for a client's errors while it is checked out. If the backend dies
    // mid-transaction (terminated, failover, network cut), the 'error' event would end the process;
    // the failing query already rejects, so here it only marks the client as not reusable.
    const onError = () => {
      broken = true;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const q: Queryable = {
        query: async <R>(sql: string, params: unknown[] = []) => {
          try {
            return shape<R>(await client.query(queryConfig(sql, params)));
          } catch (err) {
            // The connection's prepared statement outlived a migration: a fresh connection prepares it again.
            if (isStalePlan(err)) broken = true;
            throw err;
          }
        },
      };
      const result = await fn(q);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw err;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  async listen(channel: string, onNotify: (payload: string) => void, options?: ListenOptions): Promise<() => Promise<void>> {
    const client = await this.#connect();
    const local = this.#wakes.add(channel, onNotify, options);
    client.on('notification', (n) => {
      if (n.channel === channel) local.notified(n.payload ?? '');
    });
    client.on('error', () => {});
    try {
      await client.query(`LISTEN ${quoteIdent(channel)}`);
    } catch (err) {
      local.remove();
      await client.end().catch(() => {});
      throw err;
    }
    return async () => {
      local.remove();
      await client.end().catch(() => {});
    };
  }

  localWake(channel: string, payload?: string): LocalWake {
    return this.#wakes.wake(channel, payload);
  }

  async session(): Promise<Session> {
    const client = await this.#connect();
    let lost = false;
    client.on('error', () => (lost = true));
    client.on('end', () => (lost = true));
    return {
      query: async <R>(sql: string, params: unknown[] = []) => shape<R>(await client.query(sql, params)),
      lost: () => lost,
      release: async () => {
        await client.end().catch(() => {});
      },
    };
  }

  #connect(): Promise<pg.Client> {
    return this.#authRetry(async () => {
      const client = new pg.Client({
        connectionString: this.#url,
        application_name: this.#appName,
        keepAlive: true,
        options: this.#settings,
      });
      await client.connect();
      return client;
    });
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}

/**
 * A script of several statements (no parameters) gives pg an array of results; the contract is
 * the last statement's result. A command tag without a count (DDL, BEGIN) is 0 rows.
 */
function shape<T>(r: pg.QueryResult | pg.QueryResult[]): QueryResult<T> {
  const last = Array.isArray(r) ? r[r.length - 1] : r;
  return { rows: (last?.rows ?? []) as T[], rowCount: last?.rowCount ?? 0 };
}

/** Channel names are ours (constants), never input; quoting keeps them valid identifiers. */
export function quoteIdent(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`invalid identifier: ${name}`);
  return `"${name}"`;
}
