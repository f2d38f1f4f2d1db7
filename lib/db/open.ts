import { join } from 'node:path';
import type { Config } from '../config/config.ts';
import type { Db } from './db.ts';
import type { PgDbOptions } from './pg.ts';

/**
 * PostgreSQL when MSGX_PG_URL is set, else embedded PGlite under the data directory. Each engine
 * is imported only when used: the cloud never loads PGlite (half a megabyte of every bundle), and
 * the embedded twin never loads `pg` (~13 MB resident it would not use).
 */
export async function openDb(config: Pick<Config, 'pgUrl' | 'dataDir'>, options: PgDbOptions = {}): Promise<Db> {
  if (config.pgUrl) {
    const { PgDb } = await import('./pg.ts');
    return new PgDb(config.pgUrl, options);
  }
  const { PgliteDb } = await import('./pglite.ts');
  return PgliteDb.open(join(config.dataDir, 'pg'));
}
