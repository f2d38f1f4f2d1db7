import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPg, type TestPg, waitFor } from '../helpers/services.ts';

/** A backend terminated mid-transaction fails that transaction, never the process. */
describe('PgDb when its backend is terminated', () => {
  let pg: TestPg;
  beforeAll(async () => {
    pg = await freshPg({ migrate: false });
  });
  afterAll(() => pg.drop());

  it('rejects the open transaction with 57P01 and keeps working with a fresh connection', async () => {
    let pid: number | undefined;
    const failing = pg.db.tx(async (tx) => {
      pid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await tx.query('SELECT pg_sleep(60)');
    });
    failing.catch(() => {});
    // Terminated while its statement runs, the backend answers that statement with
    // admin_shutdown (57P01) before it closes the socket: the failure names the cause.
    await waitFor(
      async () =>
        pid !== undefined &&
        (await pg.db.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE 'SELECT pg_sleep%'`, [pid]))
          .rowCount === 1,
      { timeoutMs: 30_000, what: 'the transaction to run its statement' },
    );
    const terminated = await pg.db.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [pid]);
    expect(terminated.rows).toEqual([{ ok: true }]);
    await expect(failing).rejects.toMatchObject({ code: '57P01', message: expect.stringMatching(/terminating connection/) });
    // The pool drops the dead client: the next transaction gets a fresh backend.
    const r = await pg.db.tx((tx) => tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'));
    expect(r.rows[0]!.pid).not.toBe(pid);
  });
});
