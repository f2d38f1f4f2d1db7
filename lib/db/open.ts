import { join } from 'node:path';
import type { Config } from '../config/config.ts';
import type { Db } from './db.ts';
import { PgDb, type PgDbOptions } from './pg.ts';

/**
 * PostgreSQL when MSGX_PG_URL is set, else embedded PGlite under the data directory. PGlite is
 * imported only when used: the cloud never runs it, and it is half a megabyte of every bundle.
 */
export async function openDb(config: Pick<Config, 'pgUrl' | 'dataDir'>, options: PgDbOptions = {}): Promise<Db> {
  if (config.pgUrl) return new PgDb(config.pgUrl, options);
  const { PgliteDb } = await import('./pglite.ts');
  return PgliteDb.open(join(config.dataDir, 'pg'));
}
