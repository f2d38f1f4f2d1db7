import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWorker, type WorkerSummary } from '../../lib/jobs/worker.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import { makeContext } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * The handover (lib/jobs/handover.ts) on real PostgreSQL locks: a run starts its successor once,
 * before its budget ends; the successor waits for the lock and works on after its predecessor let
 * go; a run that did not get the lock starts nobody. Seen red with the successor not waiting
 * (lockWaitMs ignored): it ended `not-acquired` and the role was absent until the next tick.
 */
let pg: TestPg;
beforeAll(async () => {
  pg = await freshPg();
  await new PgMailbox(pg.db).ensureTables();
});
afterAll(async () => pg?.drop());

describe('handover to a successor', () => {
  it('the successor takes the lock when its predecessor ends; only the lock holder hands over', async () => {
    const ctx = makeContext({ db: pg.db, mailbox: new PgMailbox(pg.db), clock: systemClock });
    const idle = async () => ({ busy: false, restMs: 20 });
    let successor: Promise<WorkerSummary> | undefined;
    let starts = 0;
    const first = await runWorker(ctx, {
      role: 'handover-test',
      step: idle,
      budgetMs: 600,
      handover: {
        leadMs: 300,
        start: async () => {
          starts++;
          // Started while the first still holds the lock, as an async invoke would be.
          successor = runWorker(ctx, { role: 'handover-test', step: idle, budgetMs: 600, lockWaitMs: 2_000 });
          // A second instance that does not wait (a scheduled tick) finds the lock taken and hands over to nobody.
          const tick = await runWorker(ctx, {
            role: 'handover-test',
            step: idle,
            budgetMs: 600,
            handover: { leadMs: 300, start: async () => void starts++ },
          });
          expect(tick).toMatchObject({ acquired: false, stoppedBy: 'not-acquired' });
        },
      },
    });
    expect(first).toMatchObject({ acquired: true, stoppedBy: 'budget', handedOver: true });
    expect(starts).toBe(1);
    expect(await successor).toMatchObject({ acquired: true, stoppedBy: 'budget' });
    expect((await successor)!.steps).toBeGreaterThan(0);
  });
});
