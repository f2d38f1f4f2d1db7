import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Db } from './db.ts';

const MIGRATION_LOCK = 'msgx:migrate';

/** The folder of numbered .sql files: beside the sources, or beside a bundled function. */
export function migrationsDir(sub = ''): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [
    process.env.MSGX_MIGRATIONS_DIR,
    join(here, '..', '..', 'migrations'),
    join(here, 'migrations'),
    join(process.cwd(), 'migrations'),
  ].filter((p): p is string => !!p);
  const found = candidates.find((p) => existsSync(join(p, sub)));
  if (!found) throw new Error(`migrations folder not found (looked in ${candidates.join(', ')})`);
  return join(found, sub);
}

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export function readMigrations(dir = migrationsDir()): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d+_.+\.sql$/.test(f))
    .sort()
    .map((f) => ({ id: Number.parseInt(f, 10), name: f, sql: readFileSync(join(dir, f), 'utf8') }));
}

export interface MigrateResult {
  applied: string[];
  alreadyApplied: number;
}

/**
 * Applies each pending migration once, in order, each in its own transaction that first takes a
 * transaction-level advisory lock: two processes starting together serialise here, and the second
 * finds the work done.
 */
export async function migrate(
  db: Db,
  options: { dir?: string; onProgress?: (name: string, index: number, total: number) => void } = {},
): Promise<MigrateResult> {
  const migrations = readMigrations(options.dir);
  await db.tx(async (tx) => {
    // Under the lock too: two concurrent CREATE TABLE IF NOT EXISTS can still collide.
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [MIGRATION_LOCK]);
    await tx.query(
      `CREATE TABLE IF NOT EXISTS msgx_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
  });
  const applied: string[] = [];
  let already = 0;
  for (const [index, m] of migrations.entries()) {
    const didApply = await db.tx(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [MIGRATION_LOCK]);
      const done = await tx.query(`SELECT 1 FROM msgx_migrations WHERE id = $1`, [m.id]);
      if (done.rowCount > 0) return false;
      await tx.query(m.sql);
      await tx.query(`INSERT INTO msgx_migrations (id, name) VALUES ($1, $2)`, [m.id, m.name]);
      return true;
    });
    if (didApply) {
      applied.push(m.name);
      options.onProgress?.(m.name, index + 1, migrations.length);
    } else already++;
  }
  return { applied, alreadyApplied: already };
}
