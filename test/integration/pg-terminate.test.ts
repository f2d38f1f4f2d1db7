import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPg, type TestPg } from '../helpers/services.ts';

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
    await expect(failing).rejects.toThrow(/terminat/i);
    // Give a late 'error' event the chance to reach the process, then use the pool again.
    await new Promise((r) => setTimeout(r, 200));
    const r = await pg.db.tx((tx) => tx.query<{ ok: number }>('SELECT 1 AS ok'));
    expect(r.rows).toEqual([{ ok: 1 }]);
  });
});
