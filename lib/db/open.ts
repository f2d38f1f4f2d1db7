import { join } from 'node:path';
import type { Config } from '../config/config.ts';
import type { Db } from './db.ts';
import { PgDb, type PgDbOptions } from './pg.ts';
import { PgliteDb } from './pglite.ts';

/** PostgreSQL when MSGX_PG_URL is set, else embedded PGlite under the data directory. */
export async function openDb(config: Pick<Config, 'pgUrl' | 'dataDir'>, options: PgDbOptions = {}): Promise<Db> {
  if (config.pgUrl) return new PgDb(config.pgUrl, options);
  return PgliteDb.open(join(config.dataDir, 'pg'));
}
