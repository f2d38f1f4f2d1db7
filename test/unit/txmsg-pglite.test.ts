import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { migrate } from '../../lib/db/migrate.ts';
import { PgliteDb } from '../../lib/db/pglite.ts';
import { Router } from '../../lib/http/router.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { archiveConsumed } from '../../lib/txmsg/archive.ts';
import { checkBackOnce } from '../../lib/txmsg/checkBack.ts';
import { txmsgSentHook } from '../../lib/txmsg/hooks.ts';
import { redeliverOnce } from '../../lib/txmsg/redeliver.ts';
import { txmsgRoutes } from '../../lib/txmsg/routes.ts';

// The twin's default database is PGlite, with ONE connection: the whole life of a message must
// work there too (no statement may wait on a second connection while a transaction is open).

let db: PgliteDb;
let ctx: AppContext;
const clock = new FakeClock();
const router = new Router(txmsgRoutes);

const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  router.handle(
    {
      method,
      path,
      headers: { 'content-type': 'application/json', ...headers },
      query: {},
      body: body === undefined ? '' : JSON.stringify(body),
      params: {},
      isAdmin: true,
    },
    ctx,
  );

beforeAll(async () => {
  db = await PgliteDb.open();
  await migrate(db);
  const config = loadConfig({
    MSGX_TX_CHECK_ALLOWED_ORIGINS: 'http://127.0.0.1:9',
    MSGX_TX_REDELIVERY_SCHEDULE: '0s,1m',
    MSGX_TX_CHECK_MAX: '1',
  });
  ctx = { config, db, clock, log: silentLog, mailbox: {} as never, registry: {} as never };
});
afterAll(() => db.close());

describe('txmsg on PGlite', () => {
  it('prepare → commit → sent → redeliver → ack → archive', async () => {
    const p = await call(
      'POST',
      '/v1/tx-messages',
      { topic: 't', payload: { a: 1 }, checkUrl: 'http://127.0.0.1:9/c' },
      { 'idempotency-key': 'k' },
    );
    expect(p.status).toBe(201);
    const id = (p.body as { id: string }).id;
    expect(
      (
        await call(
          'POST',
          '/v1/tx-messages',
          { topic: 't', payload: { a: 1 }, checkUrl: 'http://127.0.0.1:9/c' },
          { 'idempotency-key': 'k' },
        )
      ).status,
    ).toBe(200);
    expect((await call('POST', `/v1/tx-messages/${id}/commit`)).body).toEqual({ id, status: 'COMMITTED' });
    const [ev] = (await db.query<{ event_id: number }>(`SELECT event_id FROM msg_event`)).rows;
    await db.tx((tx) => txmsgSentHook(tx, [{ eventId: ev!.event_id, sourceKind: 'txmsg', sourceId: id }], clock.now()));
    clock.advance(60_000);
    expect((await redeliverOnce(ctx)).enqueued).toBe(1);
    expect((await call('POST', `/v1/tx-messages/${id}/ack`)).body).toEqual({ id, status: 'CONSUMED' });
    clock.advance(ctx.config.txmsg.retentionMs);
    expect(await archiveConsumed(ctx)).toEqual({ archived: 1 });
    expect((await call('GET', `/v1/tx-messages/${id}`)).body).toMatchObject({ status: 'CONSUMED', archived: true });
  });

  it('check-back against an unreachable producer → DEAD → resend → PREPARED', async () => {
    const p = await call('POST', '/v1/tx-messages', {
      topic: 't',
      payload: 'x',
      checkUrl: 'http://127.0.0.1:9/c',
      checkAfterMs: 1,
      checkTimeoutMs: 200,
    });
    const id = (p.body as { id: string }).id;
    clock.advance(1);
    expect(await checkBackOnce(ctx)).toMatchObject({ checked: 1, dead: 1 });
    expect((await call('GET', `/admin/tx-messages/${id}/trace`)).body).toMatchObject({
      message: { status: 'DEAD', deadReason: 'check-back exhausted' },
    });
    expect((await call('POST', `/admin/tx-messages/${id}/resend`)).body).toMatchObject({ status: 'PREPARED' });
  });
});
