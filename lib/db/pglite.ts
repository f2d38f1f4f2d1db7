import { setFlagsFromString } from 'node:v8';
import { PGlite, type Results, type Transaction } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult, Session } from './db.ts';
import type { LocalWake } from './localWake.ts';
import { EmbeddedStoreError, ensureDataDir, lockDataDir, type NewDatabaseMigrations } from './pgliteDir.ts';

/**
 * PGlite's defaults reserve 160 MB of shared buffers, sized for a server; the twin's working set
 * is small and its one connection needs little, so a laptop keeps ~120 MB for itself.
 */
const START_PARAMS = [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB', '-c', 'wal_buffers=1MB', '-c', 'temp_buffers=2MB'];

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
  readonly #unlock: () => void;

  private constructor(db: PGlite, unlock: () => void) {
    this.#db = db;
    this.#unlock = unlock;
  }

  /**
   * `dataDir` undefined keeps everything in memory (tests). A directory is locked to this process
   * for as long as it is open, and created on first use (with `migrations` applied, when given);
   * anything that stops it being opened is an EmbeddedStoreError whose message says what to do.
   */
  static async open(dataDir?: string, options: { migrations?: NewDatabaseMigrations } = {}): Promise<PgliteDb> {
    const release = dataDir ? lockDataDir(dataDir) : () => {};
    // A process that ends without closing (an uncaught error) still leaves no lock behind.
    process.once('exit', release);
    const unlock = () => {
      process.off('exit', release);
      release();
    };
    try {
      if (dataDir) await ensureDataDir(dataDir, options);
      // PostgreSQL's own words on why it cannot start (PANIC: could not locate a valid checkpoint …).
      let said = '';
      const onStderr = (text: string) => {
        if (/\b(PANIC|FATAL|ERROR):/.test(text)) said = text.replace(/^.*?\b(PANIC|FATAL|ERROR):\s*/, '').trim();
        return true;
      };
      oneCompilationThread(); // not in the creating child: its memory is returned, its time is not
      const db = start(dataDir, onStderr);
      await db.waitReady.catch((err: unknown) => {
        throw new EmbeddedStoreError(
          `the embedded database in ${dataDir} cannot be opened (${said || oneLine(err)}); it was probably left inconsistent by a crash: move it aside (mv ${dataDir} ${dataDir}.broken) and start again with an empty database, or restore it from a copy`,
        );
      });
      return new PgliteDb(db, unlock);
    } catch (err) {
      unlock();
      throw err;
    }
  }

  /**
   * Creates a database in the empty or missing `dataDir` (PGlite runs initdb in this process) and
   * opens it, without the lock: only for the child that creates the twin's database in a
   * directory of its own (lib/db/pgliteCreate.ts).
   */
  static async create(dataDir: string): Promise<PgliteDb> {
    const db = start(dataDir);
    await db.waitReady;
    return new PgliteDb(db, () => {});
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

  localWake(_channel: string, payload = ''): LocalWake {
    // PGlite delivers its notifications in this process as the notifying statement ends.
    return { payload, owned: false, now: () => {} };
  }

  async session(): Promise<Session> {
    // One process, one connection: the advisory lock is taken on the only session there is.
    return { query: (sql, params) => this.query(sql, params), lost: () => false, release: async () => {} };
  }

  async close(): Promise<void> {
    try {
      await this.#db.close();
    } finally {
      this.#unlock();
    }
  }
}

/**
 * V8 optimises PGlite's hot PostgreSQL functions (TurboFan) on as many background threads as it
 * has, each with its own glibc arena, and glibc keeps each arena at its peak once the compiler's
 * memory is freed: the twin's resident memory after start varied 275-320 MiB with who was compiling
 * what when. One compilation thread at a time keeps ~30 MiB less and steadier (docs/twin.md); the
 * functions are optimised all the same, a little later. Only this process's WebAssembly is
 * affected, and only once an embedded database is opened in it (not in the child that creates
 * one: its memory goes with it, and its time is the first start's).
 */
let compileFlagsSet = false;

function oneCompilationThread(): void {
  if (compileFlagsSet) return;
  setFlagsFromString('--wasm-num-compilation-tasks=1');
  compileFlagsSet = true;
}

function start(dataDir: string | undefined, onStderr?: (text: string) => boolean): PGlite {
  return new PGlite(dataDir, { parsers: { 20: (v: string) => Number.parseInt(v, 10) }, startParams: START_PARAMS, onStderr });
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

function oneLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 200);
}
