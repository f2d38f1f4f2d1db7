import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../lib/shared/clock.ts';
import { defaultRegistry } from '../../lib/app/registry.ts';
import { backfillSweep, reconcileBackfill } from '../../lib/pipeline/backfill.ts';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { drainPoller, drainPump, makeContext } from '../helpers/pipeline.ts';
import { useFreshDatabases } from '../helpers/freshDatabases.ts';

/**
 * Shadow mode (README "Configuration", MSGX_SHADOW): msgx runs beside the system it replaces, reading the shared mailbox
 * but never writing it, and publishing to `.shadow` topics so both outputs can be compared.
 */
describe('shadow mode', () => {
  const dbs = useFreshDatabases();

  it('processes every message but never writes the mailbox, and targets .shadow topics', async () => {
    const ctx = makeContext({
      db: dbs.pg.db,
      mailbox: dbs.my.mailbox,
      clock: new FakeClock(),
      registry: defaultRegistry(),
      env: { MSGX_SHADOW: '1' },
    });
    expect([ctx.config.outbox.topicMsg, ctx.config.outbox.topicSchd]).toEqual(['msgx.msg.shadow', 'msgx.schd.shadow']);
    const ids = [
      await dbs.my.mailbox.insertInbound(
        schd('DNLD', { seqn: 1, dttm: '20261129000000', opdy: '20261129', flights: [flight({ FLID: 'S1', OPDY: '20261129' })] }),
      ),
      await dbs.my.mailbox.insertInbound(flop('ETOT', { seqn: 2, dttm: '20261129010000' }, flight({ FLID: 'S1', ETOT: '20261129101500' }))),
      await dbs.my.mailbox.insertInbound('<MSG>broken'),
    ];
    await drainPoller(ctx);
    await drainPump(ctx);
    const states = await dbs.pg.db.query<{ status: string }>(`SELECT status FROM proc_state ORDER BY msg_id`);
    expect(states.rows.map((r) => r.status)).toEqual(['SUCCEEDED', 'SUCCEEDED', 'DEAD']);
    // Nothing is owed to the mailbox, and neither the sweep nor the reconcile pass writes it.
    expect((await dbs.pg.db.query(`SELECT 1 FROM backfill_todo`)).rowCount).toBe(0);
    expect(await reconcileBackfill(ctx)).toBe(0);
    expect(await backfillSweep(ctx)).toBe(0);
    expect(await dbs.my.mailbox.filterUnprocessed(ids)).toEqual(ids);
    // A second poll finds the same unprocessed rows and enqueues none again.
    expect(await drainPoller(ctx)).toBe(0);
  });
});
