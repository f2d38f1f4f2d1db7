import mysql from 'mysql2/promise';
import { expect, it } from 'vitest';
import { orderingStats } from '../../lib/pipeline/frontier.ts';
import { pollOnce } from '../../lib/pipeline/poller.ts';
import { INBOX_CHANNEL } from '../../lib/pipeline/procState.ts';
import { rescanOnce } from '../../lib/pipeline/rescan.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { makeContext, wire } from '../helpers/pipeline.ts';
import { useFreshDatabases } from '../helpers/freshDatabases.ts';
import { waitFor } from '../helpers/services.ts';

/**
 * The holes msgx reports open (GET /admin/stats `ordering.holesOpen`, docs/ordering.md) are the IDs
 * it gave up that never filled: a row that commits in a hole after the poller stopped re-checking
 * it, found by the sweep's re-scan, fills its ID like one the poller finds.
 */
const dbs = useFreshDatabases();

/** An insert in a transaction of its own, left open (another system's slow writer). */
async function hold(): Promise<{ id: number; end(sql: 'COMMIT' | 'ROLLBACK'): Promise<void> }> {
  const c = await mysql.createConnection({ uri: dbs.my.url });
  await c.query('BEGIN');
  const [r] = await c.query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [wire({ TYPE: 'LDM', SEQN: 'held' })]);
  return {
    id: r.insertId,
    async end(sql) {
      await c.query(sql);
      await c.end();
    },
  };
}

it('a hole filled by a row the re-scan finds is no longer counted open; a rolled-back one is', async () => {
  const clock = new FakeClock('2026-11-29T01:00:00Z');
  const ctx = makeContext({
    db: dbs.pg.db,
    mailbox: dbs.my.mailbox,
    clock,
    env: { MSGX_GAP_GRACE: '1s', MSGX_HOLE_RECHECK: '5s', MSGX_LOG_LEVEL: 'SILENT' },
  });
  await dbs.my.mailbox.insertInbound(wire({ TYPE: 'LDM', SEQN: 1 }));
  const late = await hold();
  const never = await hold();
  await dbs.my.mailbox.insertInbound(wire({ TYPE: 'LDM', SEQN: 2 }));
  await pollOnce(ctx); // two gaps seen
  clock.advance(1000);
  await pollOnce(ctx); // given up: holes
  clock.advance(6000); // past the re-check window: only the re-scan looks there now
  await late.end('COMMIT');
  await never.end('ROLLBACK');
  await pollOnce(ctx);
  expect((await orderingStats(dbs.pg.db, clock.now())).lateRows).toBe(0);

  expect((await rescanOnce(ctx)).enqueued).toBe(1);
  const s = await orderingStats(dbs.pg.db, clock.now());
  expect({ holesDeclared: s.holesDeclared, holesOpen: s.holesOpen, lateRows: s.lateRows, gapsWaiting: s.gapsWaiting }).toEqual({
    holesDeclared: 2,
    holesOpen: 1,
    lateRows: 1,
    gapsWaiting: 0,
  });
});

it('a poll that opens a gap wakes a pump in the same process at its commit, without waiting for the NOTIFY', async () => {
  const ctx = makeContext({ db: dbs.pg.db, mailbox: dbs.my.mailbox, env: { MSGX_LOG_LEVEL: 'SILENT' } });
  const woken: string[] = [];
  const stop = await dbs.pg.db.listen(INBOX_CHANNEL, (payload) => woken.push(payload));
  await dbs.my.mailbox.insertInbound(wire({ TYPE: 'LDM', SEQN: 1 }));
  const slow = await hold(); // an ID between two rows, not committed yet: the poll opens a gap
  try {
    await dbs.my.mailbox.insertInbound(wire({ TYPE: 'LDM', SEQN: 2 }));
    const r = await pollOnce(ctx);
    expect(r).toMatchObject({ enqueued: 2, waiting: 1 });
    // Already delivered when the poll returns: the local wake, not the server's NOTIFY (payload '').
    expect(woken).toEqual([expect.stringMatching(/^wake:/)]);
    // The same wake's NOTIFY, when the server delivers it, is not a second wake-up here.
    await dbs.pg.db.query(`SELECT pg_notify($1, 'probe')`, [INBOX_CHANNEL]);
    await waitFor(() => woken.includes('probe'), { what: 'the probe NOTIFY' });
    expect(woken).toEqual([expect.stringMatching(/^wake:/), 'probe']);
  } finally {
    await slow.end('ROLLBACK');
    await stop();
  }
});
