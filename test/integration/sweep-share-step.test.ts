import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sweepRole } from '../../lib/jobs/roles.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { runAction } from '../../lib/txmsg/actions.ts';
import { prepare } from '../../lib/txmsg/prepare.ts';
import { findMessage } from '../../lib/txmsg/store.ts';
import { makeContext } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * The sweep shares its step's time among its tasks: a producer whose check-back
 * never answers must not hold up archiving, redelivery or anything else behind the check-back.
 * Real PostgreSQL, a real HTTP server that accepts and never answers; msgx's clock is fake (to
 * age a consumed message past its retention), the step's time is real.
 *
 * Caught on main: sweepRole's step waited for three rounds of 8 hung 60 s calls before archiving
 * (the test's 120 s ran out with the step still waiting).
 */
let pg: TestPg;
let hung: Server;
let origin: string;
const open = new Set<Socket>();
let closed = 0;

beforeAll(async () => {
  pg = await freshPg();
  hung = createServer((req) => {
    open.add(req.socket);
    req.socket.once('close', () => (open.delete(req.socket), closed++));
  });
  await new Promise<void>((r) => hung.listen(0, '127.0.0.1', () => r()));
  origin = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const s of open) s.destroy();
  hung?.close();
  await pg?.drop();
});

it(
  'archives on time while 20 check-backs hang, keeps 8 out at once, and cuts calls at the invocation end',
  { timeout: 120_000 },
  async () => {
    const clock = new FakeClock('2026-11-29T00:00:00Z');
    const mailbox = new PgMailbox(pg.db);
    await mailbox.ensureTables();
    const ctx = makeContext({ db: pg.db, mailbox, clock, env: { MSGX_TX_CHECK_ALLOWED_ORIGINS: origin, MSGX_TX_RETENTION: '1h' } });
    const hungIds: string[] = [];
    for (let i = 0; i < 20; i++) {
      const { row } = await prepare(ctx, {
        topic: 'orders',
        payload: { i },
        checkUrl: `${origin}/check`,
        checkAfterMs: 1,
        checkTimeoutMs: 60_000,
      });
      hungIds.push(row.id);
    }
    // A message consumed long ago, due for archiving.
    const { row: done } = await prepare(ctx, { topic: 'orders', payload: 'done', checkUrl: `${origin}/check`, checkAfterMs: 600_000 });
    await runAction(ctx, done.id, 'commit');
    await runAction(ctx, done.id, 'ack');
    clock.advance(2 * 3_600_000);

    const sweep = sweepRole(ctx);
    await sweep.step();
    // The step is over, and archiving ran in it, while every call it started is still waiting.
    expect(await pg.db.query(`SELECT 1 FROM tx_message_hst WHERE id = $1`, [done.id]).then((r) => r.rowCount)).toBe(1);
    expect(closed).toBe(0);
    expect(open.size).toBe(8);

    // The hung producer goes away: the calls out end, and the end of the invocation records them.
    for (const s of open) s.destroy();
    await sweep.flush!();
    const checked = await Promise.all(hungIds.map((id) => findMessage(pg.db, id)));
    expect(checked.filter((m) => m!.checks === 1)).toHaveLength(8);

    // In Lambda no call outlives the invocation: with 1 s left, the next 8 calls are cut there and
    // counted as unanswered checks (timed out), not left running into a frozen environment.
    clock.advance(60_000);
    const invocation = sweepRole(ctx);
    await invocation.step({ remainingMs: 1000 });
    await invocation.flush!();
    const after = await Promise.all(hungIds.map((id) => findMessage(pg.db, id)));
    expect(after.filter((m) => m!.checks === 1 && /^timed out after \d+ ms$/.test(m!.last_error ?? ''))).toHaveLength(8);
  },
);
