import { mkdirSync } from 'node:fs';
import { PGlite, type Results, type Transaction } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult, Session } from './db.ts';

/**
 * Embedded PostgreSQL for the twin's zero-configuration default. PGlite has exactly one
 * connection: transactions are serialised by PGlite itself, so code must never wait for a second
 * connection while it holds a transaction (it would deadlock on itself).
 *
 * Results and errors are shaped exactly as `pg` shapes them (test/integration/db-contract.test.ts):
 * `rowCount` is the count in the command tag (rows returned by a SELECT, rows changed by an
 * INSERT/UPDATE/DELETE, 0 for DDL), never PGlite's `affectedRows`, which is 0 for a SELECT and
 * cumulative across the statements of a script.
 */
export class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  readonly #db: PGlite;

  private constructor(db: PGlite) {
    this.#db = db;
  }

  /** `dataDir` undefined keeps everything in memory (tests). */
  static async open(dataDir?: string, options: { startParams?: string[] } = {}): Promise<PgliteDb> {
    if (dataDir) mkdirSync(dataDir, { recursive: true });
    const db = new PGlite(dataDir, {
      parsers: { 20: (v: string) => Number.parseInt(v, 10) },
      ...(options.startParams ? { startParams: options.startParams } : {}),
    });
    await db.waitReady;
    return new PgliteDb(db);
  }

  query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    return run<T>(this.#db, sql, params);
  }

  tx<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.#db.transaction(async (t) => fn({ query: <R>(sql: string, params: unknown[] = []) => run<R>(t, sql, params) }));
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    return this.#db.listen(channel, onNotify);
  }

  async session(): Promise<Session> {
    // One process, one connection: the advisory lock is taken on the only session there is.
    return { query: (sql, params) => this.query(sql, params), release: async () => {} };
  }

  async close(): Promise<void> {
    await this.#db.close();
  }
}

/**
 * Like `pg`: a query without parameters goes through the simple protocol, where a script of
 * several statements is allowed; the caller gets the last statement's result (pg gives an array,
 * PgDb takes its last element too).
 */
async function run<T>(db: PGlite | Transaction, sql: string, params: unknown[]): Promise<QueryResult<T>> {
  try {
    if (params.length === 0) {
      const results = await db.exec(sql);
      return shape<T>(results[results.length - 1]);
    }
    return shape<T>(await db.query<T>(sql, params));
  } catch (err) {
    throw asPgError(err);
  }
}

function shape<T>(r: Results<unknown> | undefined): QueryResult<T> {
  return { rows: (r?.rows ?? []) as T[], rowCount: r?.rowCount ?? 0 };
}

/**
 * PGlite's DatabaseError carries the same SQLSTATE fields as pg's, plus the statement and its
 * parameters: those are dropped so a logged error never carries message bodies.
 */
function asPgError(err: unknown): unknown {
  if (err && typeof err === 'object' && 'code' in err) {
    const e = err as Record<string, unknown>;
    delete e.query;
    delete e.params;
    delete e.queryOptions;
  }
  return err;
}
