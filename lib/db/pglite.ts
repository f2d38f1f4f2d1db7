import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult, Session } from './db.ts';

/**
 * Embedded PostgreSQL for the twin's zero-configuration default. PGlite has exactly one
 * connection: transactions are serialised by PGlite itself, so code must never wait for a second
 * connection while it holds a transaction (it would deadlock on itself).
 */
export class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  readonly #db: PGlite;

  private constructor(db: PGlite) {
    this.#db = db;
  }

  /** `dataDir` undefined keeps everything in memory (tests). */
  static async open(dataDir?: string): Promise<PgliteDb> {
    if (dataDir) mkdirSync(dataDir, { recursive: true });
    const db = new PGlite(dataDir, { parsers: { 20: (v: string) => Number.parseInt(v, 10) } });
    await db.waitReady;
    return new PgliteDb(db);
  }

  async query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    // Parameterless scripts (migrations) may hold several statements; exec runs them all.
    if (params.length === 0 && sql.includes(';')) {
      const results = await this.#db.exec(sql);
      const last = results[results.length - 1];
      return { rows: (last?.rows ?? []) as T[], rowCount: last?.affectedRows ?? last?.rows.length ?? 0 };
    }
    const r = await this.#db.query<T>(sql, params);
    return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
  }

  tx<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.#db.transaction(async (t) =>
      fn({
        query: async <R>(sql: string, params: unknown[] = []) => {
          if (params.length === 0 && sql.includes(';')) {
            const results = await t.exec(sql);
            const last = results[results.length - 1];
            return { rows: (last?.rows ?? []) as R[], rowCount: last?.affectedRows ?? 0 };
          }
          const r = await t.query<R>(sql, params);
          return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
        },
      }),
    );
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
