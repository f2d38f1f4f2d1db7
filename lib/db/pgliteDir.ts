import { execFile } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/**
 * The embedded database's directory: one process at a time (a lock file holding the pid), created
 * in a child process on first use, and refused with one line saying what to do when it cannot be
 * used. PGlite is single-process PostgreSQL: two processes on one directory would corrupt it.
 */
export class EmbeddedStoreError extends Error {
  override readonly name = 'EmbeddedStoreError';
}

const run = promisify(execFile);

/**
 * Takes `<dir>.lock` for this process; the returned function releases it. A lock whose process is
 * gone (SIGKILL, power cut) is taken over. The lock is created with its pid in one step (link of
 * a written file), so nobody ever reads a half-written lock.
 */
export function lockDataDir(dir: string): () => void {
  const file = `${dir}.lock`;
  mkdirSync(dirname(file), { recursive: true });
  const mine = `${file}.${process.pid}`;
  writeFileSync(mine, `${process.pid}\n`);
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        linkSync(mine, file);
        return () => {
          if (holderOf(file) === process.pid) rmSync(file, { force: true });
        };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const holder = holderOf(file);
      if (holder !== undefined && isRunning(holder))
        throw new EmbeddedStoreError(
          `the data directory ${dirname(dir)} is in use by another msgx twin (pid ${holder}); stop that one first or set MSGX_DATA_DIR to another directory (if no such process is running, delete ${file})`,
        );
      // A stale lock: its process is gone.
      rmSync(file, { force: true });
    }
    throw new EmbeddedStoreError(`could not take the lock ${file}; delete it if no msgx twin is running`);
  } finally {
    rmSync(mine, { force: true });
  }
}

function holderOf(file: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(file, 'utf8'), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `pid` is a live node process other than this one (a pid reused by another program is not). */
function isRunning(pid: number): boolean {
  if (pid === process.pid) return false; // a container restarted with the same pid
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(basename(process.execPath));
  } catch {
    return true; // no /proc (macOS): trust the signal check
  }
}

/** Migrations for a database being created: applied before it is moved into place. */
export interface NewDatabaseMigrations {
  /** The folder of numbered .sql files (lib/db/migrate.ts migrationsDir()). */
  dir: string;
  /** Called for each migration applied, in order, once the database is in place. */
  onProgress?: (name: string, index: number, total: number) => void;
  /**
   * Files of SQL that can run again (CREATE … IF NOT EXISTS) run after the migrations: what the
   * caller creates next on every start (the twin's mailbox tables), so that it finds it there.
   */
  then?: string[];
}

/**
 * Creates the database on first start. initdb, and the migrations when asked for, run in a
 * short-lived child process (lib/db/pgliteCreate.ts): in this process initdb's WebAssembly
 * instance would stay resident (~600 MB) for the life of the twin, and so would the memory V8
 * spends optimising the PostgreSQL functions that the DDL makes hot (tens of MB that glibc keeps
 * once freed; docs/twin.md). It writes to a sibling directory renamed into place at the end, so a
 * first start interrupted half-way leaves nothing that looks like a database.
 *
 * A migration (or `then` file) that fails in the child stops the child there (each migration is
 * its own transaction): the database is moved into place with what came before it, and the
 * caller's own migrate() (or table creation) meets the same failure and reports it as on any
 * other start.
 */
export async function ensureDataDir(dir: string, options: { migrations?: NewDatabaseMigrations } = {}): Promise<void> {
  if (existsSync(join(dir, 'PG_VERSION'))) return;
  if (existsSync(dir) && readdirSync(dir).length > 0)
    throw new EmbeddedStoreError(`${dir} exists but holds no database (an interrupted first start?); delete it and start again`);
  const parent = dirname(dir);
  mkdirSync(parent, { recursive: true });
  // Leftovers of first starts killed half-way (we hold the lock: nobody else is initialising).
  for (const f of readdirSync(parent))
    if (f.startsWith(`${basename(dir)}.init-`)) rmSync(join(parent, f), { recursive: true, force: true });
  const tmp = `${dir}.init-${process.pid}`;
  const args = ['--import', import.meta.resolve('tsx'), fileURLToPath(new URL('./pgliteCreate.ts', import.meta.url)), tmp];
  if (options.migrations) args.push(options.migrations.dir, ...(options.migrations.then ?? []));
  let stdout: string;
  try {
    ({ stdout } = await run(process.execPath, args, { env: { PATH: process.env.PATH ?? '' } }));
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    const stderr = String((err as { stderr?: string }).stderr ?? '')
      .trim()
      .split('\n')
      .at(-1);
    throw new EmbeddedStoreError(`could not create the embedded database in ${dir}: ${stderr || (err as Error).message}`);
  }
  if (existsSync(dir)) rmSync(dir, { recursive: true, force: true }); // empty, checked above
  renameSync(tmp, dir);
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const m = JSON.parse(line) as { name: string; index: number; total: number };
    options.migrations?.onProgress?.(m.name, m.index, m.total);
  }
}
