import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate, migrationsDir, readMigrations } from '../../lib/db/migrate.ts';
import { PgliteDb } from '../../lib/db/pglite.ts';
import { mailboxDdlFile } from '../../lib/mailbox/ddl.ts';

/**
 * The embedded database's first start (lib/db/pgliteDir.ts ensureDataDir): initdb and the
 * migrations run in a short-lived child on a sibling directory that is moved into place when
 * complete, so the twin opens a new database as it opens one on a restart.
 */
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'msgx-pglite-create-'));
  dirs.push(d);
  return d;
};

describe('creating the embedded database', () => {
  it('comes migrated, with the mailbox tables, from the child: each migration reported in order, nothing left beside it, migrate() finds it done', async () => {
    const dir = tempDir();
    // What a first start killed half-way leaves: taken away by the next one.
    mkdirSync(join(dir, 'pg.init-99999999'));
    writeFileSync(join(dir, 'pg.init-99999999', 'PG_VERSION'), '17\n');
    const seen: string[] = [];
    const db = await PgliteDb.open(join(dir, 'pg'), {
      migrations: {
        dir: migrationsDir(),
        onProgress: (name, i, n) => seen.push(`${i}/${n} ${name}`),
        then: [mailboxDdlFile('pg')],
      },
    });
    try {
      const all = readMigrations();
      expect(seen).toEqual(all.map((m, i) => `${i + 1}/${all.length} ${m.name}`));
      expect(readdirSync(dir).sort()).toEqual(['pg', 'pg.lock']);
      const r = await migrate(db);
      expect(r).toEqual({ applied: [], alreadyApplied: all.length });
      // The twin's mailbox tables came with it.
      expect((await db.query(`SELECT 1 FROM pg_tables WHERE tablename IN ('CMINMSGS', 'COUTMSGS')`)).rowCount).toBe(2);
    } finally {
      await db.close();
    }
    expect(existsSync(join(dir, 'pg.lock'))).toBe(false);
  });

  it('a migration that fails while it is created: in place with those before it; migrate() meets the same error', async () => {
    const dir = tempDir();
    const migrations = join(dir, 'migrations');
    mkdirSync(migrations);
    writeFileSync(join(migrations, '001_ok.sql'), 'CREATE TABLE created_first (id integer);');
    writeFileSync(join(migrations, '002_bad.sql'), 'CREATE TABLE created_second (id no_such_type);');
    const seen: string[] = [];
    const db = await PgliteDb.open(join(dir, 'pg'), { migrations: { dir: migrations, onProgress: (name) => seen.push(name) } });
    try {
      expect(seen).toEqual(['001_ok.sql']);
      await expect(migrate(db, { dir: migrations })).rejects.toThrow('type "no_such_type" does not exist');
      const done = await db.query<{ name: string }>('SELECT name FROM msgx_migrations ORDER BY id');
      expect(done.rows.map((r) => r.name)).toEqual(['001_ok.sql']);
    } finally {
      await db.close();
    }
  });

  it('without migrations asked for (npx msgx migrate does its own): an empty database', async () => {
    const dir = tempDir();
    const db = await PgliteDb.open(join(dir, 'pg'));
    try {
      const r = await db.query(`SELECT 1 FROM pg_tables WHERE tablename = 'msgx_migrations'`);
      expect(r.rowCount).toBe(0);
    } finally {
      await db.close();
    }
  });
});
