import { join } from 'node:path';
import type { Config } from '../config/config.ts';
import type { Db } from './db.ts';
import { migrationsDir } from './migrate.ts';
import type { PgDbOptions } from './pg.ts';

/**
 * PostgreSQL when MSGX_PG_URL is set, else embedded PGlite under the data directory. Each engine
 * is imported only when used: the cloud never loads PGlite (half a megabyte of every bundle), and
 * the embedded twin never loads `pg` (~13 MB resident it would not use).
 */
export async function openDb(config: Pick<Config, 'pgUrl' | 'dataDir'>, options: OpenDbOptions = {}): Promise<Db> {
  if (config.pgUrl) {
    const { PgDb } = await import('./pg.ts');
    return new PgDb(config.pgUrl, options);
  }
  const { PgliteDb } = await import('./pglite.ts');
  const { migrateOnCreate } = options;
  return PgliteDb.open(join(config.dataDir, 'pg'), {
    migrations: migrateOnCreate && { dir: migrationsDir(), onProgress: migrateOnCreate.onProgress, then: migrateOnCreate.then },
  });
}

export interface OpenDbOptions extends PgDbOptions {
  /**
   * For a caller that migrates next: an embedded database created by this open gets the migrations
   * in the child that creates it (lib/db/pgliteDir.ts ensureDataDir), where the memory they take
   * is returned; `onProgress` reports each as migrate() would; `then` are files of SQL that can run
   * again, run there too (the twin's mailbox tables). PostgreSQL ignores it.
   */
  migrateOnCreate?: { onProgress?: (name: string, index: number, total: number) => void; then?: string[] };
}
