import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminRoutes } from '../../lib/http/adminRoutes.ts';
import { Router } from '../../lib/http/router.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { runAction } from '../../lib/txmsg/actions.ts';
import { checkBackOnce } from '../../lib/txmsg/checkBack.ts';
import { txmsgDeadHook } from '../../lib/txmsg/hooks.ts';
import { prepare } from '../../lib/txmsg/prepare.ts';
import { findMessage } from '../../lib/txmsg/store.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { makeContext } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * GET /admin/dead?kind=txmsg honours its phase and topic filters (and pages with `after`), and
 * refuses them for the other kinds. Real PostgreSQL; deaths made the way msgx makes them (an
 * unreachable producer's check-backs, the relay giving a delivery up). Red on main: every filter
 * was ignored (all three messages listed each time).
 */
let pg: TestPg;
let ctx: AppContext;
const clock = new FakeClock('2026-11-29T00:00:00Z');
const router = new Router(adminRoutes);
const dead = async (query: Record<string, string>) =>
  router.handle({ method: 'GET', path: '/admin/dead', headers: {}, query, body: '', params: {}, isAdmin: true }, ctx);

beforeAll(async () => {
  pg = await freshPg();
  const mailbox = new PgMailbox(pg.db);
  await mailbox.ensureTables();
  ctx = makeContext({ db: pg.db, mailbox, clock, env: { MSGX_TX_CHECK_ALLOWED_ORIGINS: 'http://127.0.0.1:9', MSGX_TX_CHECK_MAX: '1' } });
});
afterAll(() => pg?.drop());

it('lists dead transactional messages by phase and topic', async () => {
  const body = (topic: string) => ({ topic, payload: 'x', checkUrl: 'http://127.0.0.1:9/c', checkAfterMs: 1, checkTimeoutMs: 200 });
  const unconfirmedA = (await prepare(ctx, body('orders'))).row.id;
  const unconfirmedB = (await prepare(ctx, body('points'))).row.id;
  clock.advance(1);
  expect(await checkBackOnce(ctx)).toMatchObject({ dead: 2 });
  const lostA = (await prepare(ctx, { ...body('orders'), checkAfterMs: 600_000 })).row.id;
  await runAction(ctx, lostA, 'commit');
  const inFlight = (await findMessage(pg.db, lostA))!.in_flight_event_id!;
  await pg.db.tx((tx) =>
    txmsgDeadHook(tx, [{ eventId: inFlight, sourceKind: 'txmsg', sourceId: lostA, error: 'HTTP 400' }], ctx.clock.now()),
  );

  const ids = async (q: Record<string, string>) => {
    const r = await dead({ kind: 'txmsg', ...q });
    expect(r.status).toBe(200);
    return (r.body as { items: { id: string }[] }).items.map((i): string => i.id).sort();
  };
  expect(await ids({})).toEqual([unconfirmedA, unconfirmedB, lostA].sort());
  expect(await ids({ phase: 'check' })).toEqual([unconfirmedA, unconfirmedB].sort());
  expect(await ids({ phase: 'delivery' })).toEqual([lostA]);
  expect(await ids({ topic: 'orders' })).toEqual([unconfirmedA, lostA].sort());
  expect(await ids({ topic: 'orders', phase: 'check' })).toEqual([unconfirmedA]);
  const all = await ids({});
  expect(await ids({ after: all[0]! })).toEqual(all.slice(1));

  expect(await dead({ kind: 'txmsg', phase: 'sent' })).toMatchObject({ status: 400, body: { detail: 'phase: must be check or delivery' } });
  expect(await dead({ kind: 'proc', topic: 'orders' })).toMatchObject({ status: 400, body: { detail: 'topic: only with kind=txmsg' } });
});
