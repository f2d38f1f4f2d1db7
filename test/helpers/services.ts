import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type { Db } from '../../lib/db/db.ts';
import { PgDb } from '../../lib/db/pg.ts';
import { migrate, readMigrations } from '../../lib/db/migrate.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';

/**
 * URLs of the real test services: from the environment, else from what `npm run services:up`
 * wrote to .services/env. A test that cannot reach a service fails; it never skips.
 */
export function serviceUrls(): { pgUrl: string; mailboxUrl: string; kafkaBrokers: string[] } {
  const fromFile: Record<string, string> = {};
  const file = join(process.cwd(), '.services', 'env');
  if (existsSync(file)) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const i = line.indexOf('=');
      if (i > 0) fromFile[line.slice(0, i)] = line.slice(i + 1).trim();
    }
  }
  const get = (k: string, dflt: string) => process.env[k] ?? fromFile[k] ?? dflt;
  return {
    pgUrl: get('MSGX_PG_URL', 'postgres://postgres@127.0.0.1:5432/test'),
    mailboxUrl: get('MSGX_MAILBOX_URL', 'mysql://root@127.0.0.1:3306/test'),
    kafkaBrokers: get('MSGX_KAFKA_BROKERS', '127.0.0.1:9092').split(','),
  };
}

const uniqueName = (prefix: string) => `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export interface TestPg {
  url: string;
  db: Db;
  drop(): Promise<void>;
}

/** The engine freshPg() gives: real PostgreSQL, or the twin's embedded PGlite (vitest project `pglite`). */
export const testEngine = (): 'pg' | 'pglite' => (process.env.MSGX_TEST_ENGINE === 'pglite' ? 'pglite' : 'pg');

/**
 * A fresh PostgreSQL database for one test file, migrated; drop() removes it. Under
 * MSGX_TEST_ENGINE=pglite the same suites run on the twin's embedded engine instead: a PgliteDb in
 * a temporary data directory (it has no URL: a suite that needs one runs on PostgreSQL only).
 */
export async function freshPg(options: { migrate?: boolean } = {}): Promise<TestPg> {
  if (testEngine() === 'pglite') return freshPglite(options);
  const { pgUrl } = serviceUrls();
  const name = uniqueName('msgx_t');
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = withDatabase(pgUrl, name);
  const db = new PgDb(url, { max: 10 });
  if (options.migrate !== false) await migrate(db);
  return {
    url,
    db,
    async drop() {
      await db.close().catch(() => {});
      const c = new pg.Client({ connectionString: pgUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** Puts a migrated embedded database at `<dataDir>/pg`, as the twin's first start would leave it. */
export async function seedPgliteDataDir(dataDir: string): Promise<void> {
  cpSync(join(await pgliteTemplate(), 'pg'), join(dataDir, 'pg'), { recursive: true });
}

async function freshPglite(options: { migrate?: boolean }): Promise<TestPg> {
  const { PgliteDb } = await import('../../lib/db/pglite.ts');
  const dir = mkdtempSync(join(tmpdir(), 'msgx-pglite-'));
  if (options.migrate !== false) await seedPgliteDataDir(dir);
  const db = await PgliteDb.open(join(dir, 'pg'));
  return {
    get url(): string {
      throw new Error('this test needs a PostgreSQL URL; it cannot run on the embedded engine (MSGX_TEST_ENGINE=pglite)');
    },
    db,
    async drop() {
      await db.close().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A migrated PGlite data directory, made once per machine for this PGlite and these migrations,
 * and copied by each test file: initdb and the migrations take ~20 s on a busy machine.
 */
async function pgliteTemplate(): Promise<string> {
  const pgliteVersion = readFileSync(new URL('../package.json', import.meta.resolve('@electric-sql/pglite')), 'utf8');
  const key = createHash('sha256')
    .update(pgliteVersion)
    .update(
      readMigrations()
        .map((m) => `${m.name}\n${m.sql}`)
        .join('\n'),
    )
    .digest('hex')
    .slice(0, 16);
  const dir = join(tmpdir(), `msgx-pglite-template-${key}`);
  // One builder at a time across the test workers (mkdir is atomic); the others wait for it.
  const building = `${dir}.building`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (existsSync(join(dir, 'ready'))) return dir;
    try {
      mkdirSync(building);
      break;
    } catch {
      // A builder that died long ago leaves its mark: take over.
      if (Date.now() - (statSync(building, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > 180_000)
        rmSync(building, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`timed out waiting for another test worker to build ${dir}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    if (existsSync(join(dir, 'ready'))) return dir;
    await buildTemplate(dir);
    return dir;
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
}

async function buildTemplate(dir: string): Promise<void> {
  const { PgliteDb } = await import('../../lib/db/pglite.ts');
  const build = mkdtempSync(join(tmpdir(), 'msgx-pglite-build-'));
  const db = await PgliteDb.open(join(build, 'pg'));
  await migrate(db);
  await db.close();
  writeFileSync(join(build, 'ready'), '');
  rmSync(dir, { recursive: true, force: true });
  renameSync(build, dir);
}

export interface TestMysql {
  url: string;
  mailbox: MysqlMailbox;
  /** A raw connection to the test database, for assertions and for simulating other writers. */
  query<T = mysql.RowDataPacket[]>(sql: string, params?: unknown[]): Promise<T>;
  drop(): Promise<void>;
}

/** A fresh MariaDB database with the mailbox tables, for one test file. */
export async function freshMysql(): Promise<TestMysql> {
  const { mailboxUrl } = serviceUrls();
  const name = uniqueName('msgx_t');
  const admin = await mysql.createConnection({ uri: mailboxUrl });
  await admin.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4`);
  await admin.end();
  const url = withDatabase(mailboxUrl, name);
  const mailbox = new MysqlMailbox(url);
  await mailbox.ensureTables();
  const conn = await mysql.createConnection({ uri: url, timezone: 'Z' });
  return {
    url,
    mailbox,
    async query<T>(sql: string, params: unknown[] = []) {
      const [rows] = await conn.query(sql, params);
      return rows as T;
    },
    async drop() {
      await mailbox.close().catch(() => {});
      await conn.query(`DROP DATABASE IF EXISTS ${name}`);
      await conn.end();
    },
  };
}

/**
 * Polls `check` (every `intervalMs`, 20 by default) until it returns a truthy value or the time
 * runs out (never a fixed sleep).
 */
export async function waitFor<T>(
  check: () => Promise<T> | T,
  options: { timeoutMs?: number; what?: string; intervalMs?: number } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 20));
  }
  throw new Error(`timed out waiting for ${options.what ?? 'condition'}${last ? `: ${String(last)}` : ''}`);
}
