import { afterAll, beforeAll } from 'vitest';
import { freshMysql, freshPg, type TestMysql, type TestPg } from './services.ts';

export interface FreshDatabases {
  /** A fresh, migrated PostgreSQL database (set in beforeAll). */
  pg: TestPg;
  /** A fresh MariaDB database with the mailbox tables (set in beforeAll). */
  my: TestMysql;
}

/**
 * A PostgreSQL and a MariaDB database of their own for the tests of the file or describe block
 * that calls this: made before them (beforeAll), dropped after them (afterAll). Hooks the caller
 * registers later run after the databases exist, and their afterAll before the databases go.
 */
export function useFreshDatabases(): FreshDatabases {
  const dbs = {} as FreshDatabases;
  beforeAll(async () => {
    dbs.pg = await freshPg();
    dbs.my = await freshMysql();
  });
  afterAll(async () => {
    await dbs.my?.drop();
    await dbs.pg?.drop();
  });
  return dbs;
}
