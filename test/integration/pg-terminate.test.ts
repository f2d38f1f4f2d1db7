import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPg, type TestPg } from '../helpers/services.ts';

const BACKEND_GONE = /terminat|connection error|not queryable|ECONNRESET|EPIPE|socket|closed|ended/i;

/** A backend terminated mid-transaction fails that transaction, never the process. */
describe('PgDb when its backend is terminated', () => {
  let pg: TestPg;
  beforeAll(async () => {
    pg = await freshPg({ migrate: false });
  });
  afterAll(() => pg.drop());

  it('rejects the open transaction and keeps working with a fresh connection', async () => {
    const failing = pg.db.tx(async (tx) => {
      const me = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await pg.db.query('SELECT pg_terminate_backend($1)', [me.rows[0]!.pid]);
      await tx.query('SELECT pg_sleep(0.2)');
    });
    // Which words the driver uses depends on whether the termination notice or the closed socket
    // reaches it first ("terminating connection due to administrator command", "Connection
    // terminated unexpectedly", "Client has encountered a connection error and is not queryable"):
    // all mean the backend went away, and any of them is the right failure.
    await expect(failing).rejects.toThrow(BACKEND_GONE);
    // Give a late 'error' event the chance to reach the process, then use the pool again.
    await new Promise((r) => setTimeout(r, 200));
    const r = await pg.db.tx((tx) => tx.query<{ ok: number }>('SELECT 1 AS ok'));
    expect(r.rows).toEqual([{ ok: 1 }]);
  });
});
