import pg from 'pg';
import type { Db, Queryable, QueryResult, Session } from './db.ts';

// int8 (ids, counts) as JS numbers: ids stay far below 2^53, and numbers keep the code simple.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));

export interface PgDbOptions {
  max?: number;
  /** Below the function timeout, so a frozen statement never holds a lock for long. */
  statementTimeoutMs?: number;
  idleInTransactionTimeoutMs?: number;
  applicationName?: string;
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
  readonly pool: pg.Pool;
  readonly #url: string;
  readonly #settings: string;
  readonly #appName: string;

  constructor(url: string, options: PgDbOptions = {}) {
    this.#url = url;
    this.#settings = sessionSettings(options);
    this.#appName = options.applicationName ?? 'msgx';
    this.pool = new pg.Pool({
      connectionString: url,
      max: options.max ?? 10,
      application_name: this.#appName,
      keepAlive: true,
      options: this.#settings,
    });
    // An idle client that dies (server restart) must not crash the process.
    this.pool.on('error', () => {});
  }

  async query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    return shape<T>(await this.pool.query(sql, params));
  }

  async tx<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
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
        query: async <R>(sql: string, params: unknown[] = []) => shape<R>(await client.query(sql, params)),
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

  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    const client = await this.#connect();
    client.on('notification', (n) => {
      if (n.channel === channel) onNotify(n.payload ?? '');
    });
    client.on('error', () => {});
    await client.query(`LISTEN ${quoteIdent(channel)}`);
    return async () => {
      await client.end().catch(() => {});
    };
  }

  async session(): Promise<Session> {
    const client = await this.#connect();
    client.on('error', () => {});
    return {
      query: async <R>(sql: string, params: unknown[] = []) => shape<R>(await client.query(sql, params)),
      release: async () => {
        await client.end().catch(() => {});
      },
    };
  }

  async #connect(): Promise<pg.Client> {
    const client = new pg.Client({
      connectionString: this.#url,
      application_name: this.#appName,
      keepAlive: true,
      options: this.#settings,
    });
    await client.connect();
    return client;
  }

  async close(): Promise<void> {
    await this.pool.end();
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
