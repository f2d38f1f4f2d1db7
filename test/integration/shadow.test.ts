import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../lib/shared/clock.ts';
import { defaultRegistry } from '../../lib/app/registry.ts';
import { backfillSweep, reconcileBackfill } from '../../lib/pipeline/backfill.ts';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { drainPoller, drainPump, makeContext } from '../helpers/pipeline.ts';
import { useFreshDatabases } from '../helpers/freshDatabases.ts';
import { fileSink } from '../helpers/fileSink.ts';
import { freshMysql, freshPg, waitFor } from '../helpers/services.ts';
import { killTwins, startTwin } from '../helpers/twinChild.ts';

/**
 * Shadow mode (README "Configuration", MSGX_SHADOW): msgx runs beside the system it replaces, reading the shared mailbox
 * but never writing it, and publishing to `.shadow` topics so both outputs can be compared.
 */
describe('shadow mode', () => {
  const dbs = useFreshDatabases();

  it('processes every message but never writes the mailbox, and its config names the .shadow topics', async () => {
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

  it(
    'the twin in shadow mode publishes to the .shadow topics only, and leaves the mailbox rows unmarked',
    { timeout: 180_000 },
    async () => {
      const pg = await freshPg({ migrate: false });
      const my = await freshMysql();
      const dir = mkdtempSync(join(tmpdir(), 'msgx-shadow-'));
      const c = await mysql.createConnection({ uri: my.url });
      try {
        // No brokers: the file sink stands in for Kafka, a file per topic it was given.
        const twin = await startTwin({ MSGX_PG_URL: pg.url, MSGX_MAILBOX_URL: my.url, MSGX_SHADOW: '1', MSGX_TIMEZONE: 'UTC' }, dir);
        const insert = async (text: string) =>
          (await c.query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [text]))[0].insertId;
        const planId = await insert(
          schd('DNLD', { seqn: 'sh1', dttm: '20261129000000', opdy: '20261129', flights: [flight({ FLID: 'S2', OPDY: '20261129' })] }),
        );
        const flopId = await insert(flop('ETOT', { seqn: 'sh2', dttm: '20261129010000' }, flight({ FLID: 'S2', ETOT: '20261129101500' })));
        const events = join(dir, '.msgx');
        const changes = () =>
          fileSink(events, 'msgx.msg.shadow').map((r) => {
            const v = JSON.parse(r.value) as { stateVersion: number; source: { msgId: number } };
            return [r.key, v.stateVersion, v.source.msgId];
          });
        await waitFor(() => changes().length >= 2, { timeoutMs: 60_000, what: 'both changes of S2 on msgx.msg.shadow' });
        await waitFor(() => fileSink(events, 'msgx.schd.shadow').some((r) => r.key === 'S2' && JSON.parse(r.value).stateVersion === 2), {
          timeoutMs: 60_000,
          what: 'the newest state of S2 on msgx.schd.shadow',
        });
        expect(changes()).toEqual([
          ['S2', 1, planId],
          ['S2', 2, flopId],
        ]);
        expect(JSON.parse(fileSink(events, 'msgx.schd.shadow').at(-1)!.value)).toMatchObject({
          FLID: 'S2',
          ETOT: '20261129101500',
          stateVersion: 2,
        });
        // The production topics got nothing.
        expect(existsSync(join(events, 'events', 'msgx.msg.jsonl'))).toBe(false);
        expect(existsSync(join(events, 'events', 'msgx.schd.jsonl'))).toBe(false);
        const [rows] = await c.query<mysql.RowDataPacket[]>('SELECT ID, DATE_PROCESSED, PROC_STATUS FROM CMINMSGS ORDER BY ID');
        expect(rows.map((r) => ({ ...r }))).toEqual([
          { ID: planId, DATE_PROCESSED: null, PROC_STATUS: null },
          { ID: flopId, DATE_PROCESSED: null, PROC_STATUS: null },
        ]);
        expect(await twin.stop('SIGTERM', { killAfterMs: 20_000 })).toBe(0);
      } finally {
        killTwins();
        await c.end();
        await my.drop();
        await pg.drop();
      }
    },
  );
});
