import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { PgDb } from '../../lib/db/pg.ts';
import { migrate } from '../../lib/db/migrate.ts';
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
  db: PgDb;
  drop(): Promise<void>;
}

/** A fresh PostgreSQL database for one test file, migrated; drop() removes it. */
export async function freshPg(options: { migrate?: boolean } = {}): Promise<TestPg> {
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

/** Polls `check` until it returns a truthy value or the time runs out (never a fixed sleep). */
export async function waitFor<T>(check: () => Promise<T> | T, options: { timeoutMs?: number; what?: string } = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${options.what ?? 'condition'}${last ? `: ${String(last)}` : ''}`);
}
