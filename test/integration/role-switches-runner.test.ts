import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCHEDULED_ROLES } from '../../lib/app/catalogue.ts';
import { localPorts, localRole } from '../../lib/app/localRoles.ts';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { makeContext } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * A role switched off by MSGX_DISABLED_ROLES, built the one way every runner builds it (the
 * catalogue's factory through catalogueRole, as the Lambda handler does): a run ends at once,
 * takes no lock, runs no step. Seen red with catalogueRole ignoring the setting (each run took
 * the lock and stepped).
 */
let pg: TestPg;
beforeAll(async () => {
  pg = await freshPg();
  await new PgMailbox(pg.db).ensureTables();
});
afterAll(async () => pg?.drop());

describe.each(SCHEDULED_ROLES)('the %s role switched off', (name) => {
  it('ends its run at once without its lock; the other roles are built as before', async () => {
    const ctx = makeContext({ db: pg.db, mailbox: new PgMailbox(pg.db), env: { MSGX_DISABLED_ROLES: name } });
    const ports = localPorts();
    try {
      const spec = await localRole(ctx, name, ports);
      expect(spec.disabled).toBe(true);
      let stepped = 0;
      const stop = new AbortController();
      const summary = await runWorker(ctx, {
        ...spec,
        step: async () => {
          stepped++;
          stop.abort(); // were it to run, one step is enough to see it
          return { busy: false };
        },
        signal: stop.signal,
      });
      expect(summary).toMatchObject({ role: name, acquired: false, steps: 0, stoppedBy: 'disabled' });
      expect(stepped).toBe(0);
      // Its lock was never taken: another session gets it at once.
      const other = await tryRoleLock(pg.db, name);
      expect(other).not.toBeNull();
      await other!.release();
      for (const on of SCHEDULED_ROLES.filter((r) => r !== name)) expect((await localRole(ctx, on, ports)).disabled).toBeUndefined();
    } finally {
      await ports.close();
    }
  });
});
