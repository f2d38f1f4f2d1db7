import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ORDERS_DDL, OrderService } from '../../examples/order-points/orders.ts';
import { POINTS_DDL, PointsService, type ConsumedRecord } from '../../examples/order-points/points.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { adminRoutes } from '../../lib/http/adminRoutes.ts';
import { Router } from '../../lib/http/router.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { FakeClock, systemClock, type Clock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { TxMessageClient, TxUnavailableError } from '../../lib/txmsg/client.ts';
import { archiveConsumed } from '../../lib/txmsg/archive.ts';
import { checkBackOnce } from '../../lib/txmsg/checkBack.ts';
import { deadTxMessages } from '../../lib/txmsg/dead.ts';
import { txmsgDeadHook, txmsgSentHook } from '../../lib/txmsg/hooks.ts';
import { redeliverOnce } from '../../lib/txmsg/redeliver.ts';
import { txmsgRoutes } from '../../lib/txmsg/routes.ts';
import { freshPg, waitFor, type TestPg } from '../helpers/services.ts';
import { verifySignature } from '../../lib/shared/signature.ts';

// ---------------------------------------------------------------------------------------------
// Harness: msgx's txmsg routes over real HTTP, the example's order (producer) and points
// (consumer) services, and a stand-in relay that honours the dispatcher's onSent/onDead contract.
// ---------------------------------------------------------------------------------------------

let pgdb: TestPg;
let pool: pg.Pool;
let clock: FakeClock;
let ctx: AppContext;
let msgxUrl: string;
let orderUrl: string;
const servers: http.Server[] = [];
/** What the producer's check endpoint does; default: the order service's real answer. */
let checkOverride: ((req: http.IncomingMessage, res: http.ServerResponse) => boolean) | undefined;
let orders: OrderService;
/** The "topic": records the relay published, in order; the consumer reads them from here. */
let topicLog: (ConsumedRecord & { eventId: number })[] = [];
let consumed = 0;

async function listen(server: http.Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The twin's job, in miniature: node:http request → HttpRequest → Router. */
function msgxServer(context: AppContext): http.Server {
  const router = new Router(txmsgRoutes);
  return http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const u = new URL(req.url ?? '/', 'http://msgx');
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : (v ?? '')]));
    const r = await router.handle(
      {
        method: req.method ?? 'GET',
        path: u.pathname,
        headers,
        query: Object.fromEntries(u.searchParams),
        body: Buffer.concat(chunks).toString('utf8'),
        params: {},
        isAdmin: headers['x-test-admin'] === 'yes',
      },
      context,
    );
    res.writeHead(r.status, { 'content-type': 'application/json' }).end(r.body === undefined ? '' : JSON.stringify(r.body));
  });
}

function makeContext(c: Clock, env: Record<string, string> = {}): AppContext {
  const config = loadConfig({
    MSGX_TX_REDELIVERY_SCHEDULE: '0s,1m,4m',
    MSGX_TX_CHECK_MAX: '3',
    MSGX_TX_CHECK_INTERVAL: '60s',
    MSGX_SIGNING_SECRET: 'test-secret',
    ...env,
  });
  return { config, db: pgdb.db, clock: c, log: silentLog, mailbox: {} as never, registry: {} as never };
}

type Fault = 'drop-request' | 'drop-response' | 'http-503';
/** A fetch that fails the calls `rule` picks: before they reach msgx, or after (answer lost). */
function faultyFetch(rule: (method: string, url: string) => Fault | undefined): typeof fetch {
  return async (input, init) => {
    const url = String(input);
    const fault = rule(init?.method ?? 'GET', url);
    if (fault === 'drop-request') throw new TypeError('fetch failed (injected: request lost)');
    if (fault === 'http-503') return new Response('{"error":"unavailable"}', { status: 503 });
    const res = await fetch(input, init);
    if (fault === 'drop-response') {
      await res.text();
      throw new DOMException('The operation was aborted due to timeout (injected: answer lost)', 'TimeoutError');
    }
    return res;
  };
}

function client(
  rule?: (method: string, url: string) => Fault | undefined,
  extra: Partial<ConstructorParameters<typeof TxMessageClient>[0]> = {},
) {
  return new TxMessageClient({ baseUrl: msgxUrl, retries: 0, retryDelayMs: 5, fetch: rule ? faultyFetch(rule) : undefined, ...extra });
}

function orderService(msgx: TxMessageClient): OrderService {
  return new OrderService({ pool, msgx, checkUrl: `${orderUrl}/tx-check`, checkAfterMs: 30_000, signingSecret: 'test-secret' });
}

/**
 * Stands in for lib/outbox/dispatcher.ts: publishes pending tx:* events to the topic log in event
 * order, marks them SENT and calls the txmsg hook in that same transaction. `fail` keeps them
 * pending (a broker outage); `giveUp` marks them DEAD and calls the dead hook.
 */
async function relayOnce(mode: 'ok' | 'fail' | 'giveUp' = 'ok', lose?: (eventId: number) => boolean): Promise<number> {
  const r = await pgdb.db.query<{
    event_id: number;
    value: string;
    headers: Record<string, string>;
    source_kind: string;
    source_id: string;
  }>(
    `SELECT event_id, value, headers, source_kind, source_id FROM msg_event WHERE status = 'PENDING' AND target LIKE 'tx:%' ORDER BY event_id`,
  );
  if (mode === 'fail' || r.rows.length === 0) return 0;
  const now = ctx.clock.now();
  const settled = r.rows.map((e) => ({
    eventId: e.event_id,
    sourceKind: e.source_kind,
    sourceId: e.source_id,
    error: 'broker unreachable',
  }));
  await pgdb.db.tx(async (tx) => {
    const status = mode === 'ok' ? 'SENT' : 'DEAD';
    await tx.query(
      `UPDATE msg_event SET status = $2::text, sent_at = CASE WHEN $2 = 'SENT' THEN $3::timestamptz END,
                     dead_at = CASE WHEN $2 = 'DEAD' THEN $3::timestamptz END, last_error = $4 WHERE event_id = ANY($1::bigint[])`,
      [r.rows.map((e) => e.event_id), status, now, mode === 'ok' ? null : 'broker unreachable'],
    );
    if (mode === 'ok') await txmsgSentHook(tx, settled, now);
    else await txmsgDeadHook(tx, settled, now);
  });
  if (mode === 'ok')
    for (const e of r.rows) if (!lose?.(e.event_id)) topicLog.push({ eventId: e.event_id, value: e.value, headers: e.headers });
  return r.rows.length;
}

/** The consumer polls the topic from its offset; `handle` may throw (then no ack, no commit). */
async function consumeAll(handle: (r: ConsumedRecord) => Promise<unknown>): Promise<void> {
  while (consumed < topicLog.length) {
    const rec = topicLog[consumed++]!;
    await handle(rec).catch(() => {});
  }
}

const status = async (id: string) =>
  (await pgdb.db.query<{ status: string }>(`SELECT status FROM tx_message WHERE id = $1`, [id])).rows[0]?.status;
const row = async (id: string) => (await pgdb.db.query<Record<string, any>>(`SELECT * FROM tx_message WHERE id = $1`, [id])).rows[0]!;
const eventsOf = async (id: string) =>
  (
    await pgdb.db.query<Record<string, any>>(`SELECT * FROM msg_event WHERE source_kind = 'txmsg' AND source_id = $1 ORDER BY event_id`, [
      id,
    ])
  ).rows;
const txCount = async () => (await pgdb.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tx_message`)).rows[0]!.n;

async function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(msgxUrl + path, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const prepareBody = (extra: Record<string, unknown> = {}) => ({
  topic: 'points',
  key: 'u1',
  payload: { version: 1, orderRef: 'r1', userId: 'u1', points: 5 },
  checkUrl: `${orderUrl}/tx-check`,
  checkAfterMs: 30_000,
  ...extra,
});

beforeAll(async () => {
  pgdb = await freshPg();
  pool = new pg.Pool({ connectionString: pgdb.url, max: 5 });
  await pool.query(ORDERS_DDL);
  await pool.query(POINTS_DDL);
  clock = new FakeClock();
  ctx = makeContext(clock);
  msgxUrl = await listen(msgxServer(ctx));
  const orderServer = http.createServer((req, res) => {
    if (checkOverride?.(req, res)) return;
    void orders.handleHttp(req, res);
  });
  orderUrl = await listen(orderServer);
  ctx.config.txmsg.checkAllowedOrigins = [orderUrl];
  orders = orderService(client());
});

afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections?.();
    s.close();
  }
  await pool?.end();
  await pgdb?.drop();
});

beforeEach(async () => {
  checkOverride = undefined;
  // Every test starts from an empty exchange: older messages must not be due in its rounds.
  await pgdb.db.query(`TRUNCATE tx_message, tx_message_hst, tx_message_log, tx_idempotency, msg_event, audit_log CASCADE`);
  await pool.query(`TRUNCATE ex_orders, ex_points`);
  topicLog = [];
  consumed = 0;
});

const points = (msgx = client()) => new PointsService({ pool, msgx });

/** Drives the roles until nothing is due: relay, consumer, check-back and redelivery rounds. */
async function settle(consumer: (r: ConsumedRecord) => Promise<unknown> = (r) => points().handle(r)) {
  for (let i = 0; i < 5; i++) {
    await checkBackOnce(ctx);
    await redeliverOnce(ctx);
    await relayOnce();
    await consumeAll(consumer);
  }
}

// ---------------------------------------------------------------------------------------------

describe('HTTP contract', () => {
  it('prepares a half message: 201 {id, status}, then GET shows it', async () => {
    const r = await api('POST', '/v1/tx-messages', prepareBody({ key: undefined, headers: { 'x-trace': 't1' } }));
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ id: expect.any(String), status: 'PREPARED' });
    const g = await api('GET', `/v1/tx-messages/${r.body.id}`);
    expect(g.status).toBe(200);
    expect(g.body).toMatchObject({
      id: r.body.id,
      topic: 'points',
      key: null,
      status: 'PREPARED',
      attempts: 0,
      checks: 0,
      createdAt: clock.now().toISOString(),
      headers: { 'x-trace': 't1' },
      nextCheckAt: new Date(clock.now().getTime() + 30_000).toISOString(),
    });
    expect(await eventsOf(r.body.id)).toEqual([]); // invisible to consumers until committed
  });

  it('rtm message fields: business name and creator from the prepare, resender from the resend; in GET and the dead list', async () => {
    const r = await api('POST', '/v1/tx-messages', prepareBody({ bizName: 'order-points', createdBy: 'u-1001', checkAfterMs: 1 }));
    expect(r.status).toBe(201);
    const id = r.body.id as string;
    expect((await api('GET', `/v1/tx-messages/${id}`)).body).toMatchObject({
      bizName: 'order-points',
      createdBy: 'u-1001',
      resentBy: null,
      resentAt: null,
    });
    // The producer cannot answer: DEAD unconfirmed after MSGX_TX_CHECK_MAX=3 check-backs.
    checkOverride = (_req, res) => (res.writeHead(503).end(), true);
    clock.advance(1);
    for (let i = 0; i < 3; i++) {
      await checkBackOnce(ctx);
      clock.advance(60_000);
    }
    const dead = await new Router(adminRoutes).handle(
      { method: 'GET', path: '/admin/dead', headers: {}, query: { kind: 'txmsg' }, body: '', params: {}, isAdmin: true },
      ctx,
    );
    expect((dead.body as any).items).toEqual([
      expect.objectContaining({ id, status: 'DEAD', bizName: 'order-points', createdBy: 'u-1001', resentBy: null }),
    ]);
    const at = clock.now().toISOString();
    expect((await api('POST', `/admin/tx-messages/${id}/resend`, undefined, { 'x-test-admin': 'yes', 'x-msgx-actor': 'bob' })).status).toBe(
      200,
    );
    expect((await api('GET', `/v1/tx-messages/${id}`)).body).toMatchObject({
      status: 'PREPARED',
      bizName: 'order-points',
      createdBy: 'u-1001',
      resentBy: 'bob',
      resentAt: at,
    });
  });

  it.each([
    [{ bizName: 'x'.repeat(71) }, 'bizName'],
    [{ bizName: '' }, 'bizName'],
    [{ createdBy: 42 }, 'createdBy'],
  ])('refuses prepare fields %o, naming %s', async (extra, field) => {
    const r = await api('POST', '/v1/tx-messages', prepareBody(extra));
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain(field);
  });

  it('an Idempotency-Key returns the same message (200); with another body it is 409', async () => {
    const a = await api('POST', '/v1/tx-messages', prepareBody(), { 'idempotency-key': 'k-1' });
    const b = await api('POST', '/v1/tx-messages', { ...prepareBody() }, { 'idempotency-key': 'k-1' });
    expect(a.status).toBe(201);
    expect(b).toEqual({ status: 200, body: { id: a.body.id, status: 'PREPARED' } });
    const c = await api('POST', '/v1/tx-messages', prepareBody({ key: 'u2' }), { 'idempotency-key': 'k-1' });
    expect(c.status).toBe(409);
    expect(c.body).toMatchObject({ error: 'idempotency_conflict', id: a.body.id });
    expect(await txCount()).toBe(1);
  });

  it('concurrent prepares with one Idempotency-Key create one message', async () => {
    const all = await Promise.all(
      Array.from({ length: 8 }, () => api('POST', '/v1/tx-messages', prepareBody(), { 'idempotency-key': 'k-race' })),
    );
    expect(new Set(all.map((r) => r.body.id)).size).toBe(1);
    expect(all.filter((r) => r.status === 201)).toHaveLength(1);
    expect(await txCount()).toBe(1);
  });

  it.each([
    [{ topic: 'points', payload: 1 }, 'checkUrl'],
    [{ topic: 'points', checkUrl: 'http://127.0.0.1:1/x' }, 'payload'],
    [{ payload: 1, checkUrl: 'http://127.0.0.1:1/x' }, 'topic'],
  ])('rejects %j with 400 naming %s, storing nothing', async (body, field) => {
    const r = await api('POST', '/v1/tx-messages', body);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'invalid_request', field });
    expect(r.body.detail).toContain(field);
    expect(await txCount()).toBe(0);
  });

  it('rejects a body that is not JSON, and a check URL outside the allow-list', async () => {
    expect((await api('POST', '/v1/tx-messages', '{nope')).status).toBe(400);
    const r = await api('POST', '/v1/tx-messages', prepareBody({ checkUrl: 'http://127.0.0.1:1/tx-check' }));
    expect(r.status).toBe(400);
    expect(r.body.detail).toMatch(/not listed in MSGX_TX_CHECK_ALLOWED_ORIGINS/);
    expect(await txCount()).toBe(0);
  });

  it('refuses every prepare with 400 while MSGX_TX_CHECK_ALLOWED_ORIGINS is unset', async () => {
    const saved = ctx.config.txmsg.checkAllowedOrigins;
    ctx.config.txmsg.checkAllowedOrigins = [];
    try {
      const r = await api('POST', '/v1/tx-messages', prepareBody());
      expect(r.status).toBe(400);
      expect(r.body.detail).toMatch(/MSGX_TX_CHECK_ALLOWED_ORIGINS is not set/);
    } finally {
      ctx.config.txmsg.checkAllowedOrigins = saved;
    }
  });

  it('commit hands the message to the relay: its topic, key, JSON payload, producer headers + msgx-txmsg-id', async () => {
    const { body } = await api('POST', '/v1/tx-messages', prepareBody({ headers: { 'x-trace': 't1' } }));
    expect(await api('POST', `/v1/tx-messages/${body.id}/commit`)).toEqual({ status: 200, body: { id: body.id, status: 'COMMITTED' } });
    expect(await api('POST', `/v1/tx-messages/${body.id}/commit`)).toEqual({ status: 200, body: { id: body.id, status: 'COMMITTED' } });
    const events = await eventsOf(body.id);
    expect(events).toHaveLength(1); // the repeated commit was a no-op
    expect(events[0]).toMatchObject({
      target: 'tx:points',
      partition_key: 'u1',
      event_type: 'TX_MESSAGE',
      status: 'PENDING',
      value: JSON.stringify(prepareBody().payload),
      headers: { 'x-trace': 't1', 'msgx-txmsg-id': body.id },
    });
  });

  it('sends a string payload as is and an absent key as null', async () => {
    const { body } = await api('POST', '/v1/tx-messages', prepareBody({ key: undefined, payload: 'plain "text"' }));
    await api('POST', `/v1/tx-messages/${body.id}/commit`);
    const [e] = await eventsOf(body.id);
    expect(e).toMatchObject({ value: 'plain "text"', partition_key: null });
  });

  it('impossible transitions are 409 {error, detail, state}', async () => {
    const a = (await api('POST', '/v1/tx-messages', prepareBody())).body.id;
    const ack = await api('POST', `/v1/tx-messages/${a}/ack`);
    expect(ack.status).toBe(409);
    expect(ack.body).toMatchObject({ error: 'illegal_transition', state: 'PREPARED', detail: expect.stringContaining('ack') });
    await api('POST', `/v1/tx-messages/${a}/rollback`);
    const commit = await api('POST', `/v1/tx-messages/${a}/commit`);
    expect(commit).toMatchObject({ status: 409, body: { state: 'ROLLED_BACK', detail: expect.stringContaining('rolled back') } });
  });

  it('404 for an unknown id; admin routes are operator-only', async () => {
    expect((await api('GET', '/v1/tx-messages/nope')).status).toBe(404);
    expect((await api('POST', '/v1/tx-messages/nope/commit')).status).toBe(404);
    expect((await api('GET', '/admin/tx-messages/nope/trace')).status).toBe(403);
    expect((await api('POST', '/admin/tx-messages/nope/resend')).status).toBe(403);
    expect((await api('GET', '/admin/tx-messages/nope/trace', undefined, { 'x-test-admin': 'yes' })).status).toBe(404);
  });

  it('an ack that overtakes the SENT record counts, and the late hook does not move it back', async () => {
    const { body } = await api('POST', '/v1/tx-messages', prepareBody());
    await api('POST', `/v1/tx-messages/${body.id}/commit`);
    expect(await api('POST', `/v1/tx-messages/${body.id}/ack`)).toEqual({ status: 200, body: { id: body.id, status: 'CONSUMED' } });
    await relayOnce();
    expect(await status(body.id)).toBe('CONSUMED');
    clock.advance(10 * 60_000);
    expect((await redeliverOnce(ctx)).enqueued).toBe(0);
    expect(await eventsOf(body.id)).toHaveLength(1);
  });
});

// Every action on every state over HTTP: the API face of the transition table.
describe('actions on every state', () => {
  async function messageIn(state: string): Promise<string> {
    const id = (await api('POST', '/v1/tx-messages', prepareBody({ checkAfterMs: 1 }))).body.id as string;
    clock.advance(1);
    const kill = async () => {
      checkOverride = (_req, res) => (res.writeHead(200).end('{"status":"UNKNOWN"}'), true);
      for (let i = 0; i < 3; i++) {
        await checkBackOnce(ctx);
        clock.advance(60_000);
      }
      checkOverride = undefined;
    };
    switch (state) {
      case 'PREPARED':
        return id;
      case 'ROLLED_BACK':
        await api('POST', `/v1/tx-messages/${id}/rollback`);
        break;
      case 'DEAD(check)':
        await kill();
        break;
      default: {
        await api('POST', `/v1/tx-messages/${id}/commit`);
        if (state === 'COMMITTED') break;
        if (state === 'DEAD(delivery)') {
          await relayOnce('giveUp');
          break;
        }
        await relayOnce();
        if (state === 'CONSUMED') await api('POST', `/v1/tx-messages/${id}/ack`);
      }
    }
    expect(await status(id)).toBe(state.replace(/\(.*/, ''));
    return id;
  }

  // [state, commit, rollback, ack, resend] → status code and resulting status (409 keeps it).
  const table: [string, ...[number, string][]][] = [
    ['PREPARED', [200, 'COMMITTED'], [200, 'ROLLED_BACK'], [409, 'PREPARED'], [409, 'PREPARED']],
    ['COMMITTED', [200, 'COMMITTED'], [409, 'COMMITTED'], [200, 'CONSUMED'], [409, 'COMMITTED']],
    ['DELIVERED', [200, 'DELIVERED'], [409, 'DELIVERED'], [200, 'CONSUMED'], [409, 'DELIVERED']],
    ['CONSUMED', [200, 'CONSUMED'], [409, 'CONSUMED'], [200, 'CONSUMED'], [409, 'CONSUMED']],
    ['ROLLED_BACK', [409, 'ROLLED_BACK'], [200, 'ROLLED_BACK'], [409, 'ROLLED_BACK'], [409, 'ROLLED_BACK']],
    ['DEAD(check)', [409, 'DEAD'], [409, 'DEAD'], [409, 'DEAD'], [200, 'PREPARED']],
    ['DEAD(delivery)', [200, 'DEAD'], [409, 'DEAD'], [200, 'CONSUMED'], [200, 'COMMITTED']],
  ];
  const actions = ['commit', 'rollback', 'ack', 'resend'] as const;
  for (const [state, ...expected] of table) {
    for (const [i, action] of actions.entries()) {
      const [code, after] = expected[i]!;
      it(`${action} on ${state} → ${code} ${after}`, async () => {
        const id = await messageIn(state);
        const path = action === 'resend' ? `/admin/tx-messages/${id}/resend` : `/v1/tx-messages/${id}/${action}`;
        const r = await api('POST', path, undefined, { 'x-test-admin': 'yes' });
        expect(r.status).toBe(code);
        if (code === 409)
          expect(r.body).toMatchObject({ error: 'illegal_transition', state: state.replace(/\(.*/, ''), detail: expect.any(String) });
        else expect(r.body).toMatchObject({ id, status: after });
        expect(await status(id)).toBe(after);
      });
    }
  }
});

// ---------------------------------------------------------------------------------------------
// The failure points of docs/txmsg.md "Failure points → tests": 1–6 producer ↔ msgx, 7–10 msgx ↔ consumer.
// ---------------------------------------------------------------------------------------------

const isPrepare = (m: string, u: string) => m === 'POST' && u.endsWith('/v1/tx-messages');
const isCall = (name: string) => (m: string, u: string) => m === 'POST' && u.endsWith(`/${name}`);
const orderCount = async () => (await pool.query(`SELECT count(*)::int AS n FROM ex_orders`)).rows[0].n as number;

describe('failure points, producer side', () => {
  it('1: the prepare never reaches msgx → the local transaction never runs, nothing anywhere', async () => {
    const svc = orderService(client((m, u) => (isPrepare(m, u) ? 'drop-request' : undefined)));
    await expect(svc.placeOrder('u1', 10)).rejects.toBeInstanceOf(TxUnavailableError);
    expect(await orderCount()).toBe(0);
    expect(await txCount()).toBe(0);
  });

  it('2: msgx cannot store the half message → 5xx, the local transaction never runs, nothing stored', async () => {
    await pgdb.db.query(`CREATE FUNCTION fail_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$`);
    await pgdb.db.query(`CREATE TRIGGER fail_insert BEFORE INSERT ON tx_message FOR EACH ROW EXECUTE FUNCTION fail_insert()`);
    try {
      await expect(orderService(client(undefined, { retries: 1 })).placeOrder('u1', 10)).rejects.toBeInstanceOf(TxUnavailableError);
    } finally {
      await pgdb.db.query(`DROP TRIGGER fail_insert ON tx_message; DROP FUNCTION fail_insert()`);
    }
    expect(await orderCount()).toBe(0);
    expect(await txCount()).toBe(0);
  });

  it('3: the half message is stored but the caller timed out → no local work; check-back rolls it back, nothing delivered', async () => {
    const svc = orderService(client((m, u) => (isPrepare(m, u) ? 'drop-response' : undefined)));
    await expect(svc.placeOrder('u1', 10)).rejects.toBeInstanceOf(TxUnavailableError);
    expect(await orderCount()).toBe(0);
    const [{ id }] = (await pgdb.db.query<{ id: string }>(`SELECT id FROM tx_message`)).rows as [{ id: string }];
    expect(await status(id)).toBe('PREPARED');
    expect((await checkBackOnce(ctx)).checked).toBe(0); // not due before checkAfterMs
    clock.advance(30_000);
    expect(await checkBackOnce(ctx)).toMatchObject({ checked: 1, rolledBack: 1 });
    expect(await status(id)).toBe('ROLLED_BACK');
    await settle();
    expect(await eventsOf(id)).toEqual([]);
  });

  it('3b: a prepare retried after a lost answer reuses its Idempotency-Key → one message, committed once', async () => {
    let first = true;
    const svc = orderService(client((m, u) => (isPrepare(m, u) && first ? ((first = false), 'drop-response') : undefined), { retries: 2 }));
    const { txId } = await svc.placeOrder('u1', 10);
    expect(await txCount()).toBe(1);
    expect(await status(txId)).toBe('COMMITTED');
  });

  it('4: the local transaction fails → the client rolls back; nothing delivered', async () => {
    await expect(orders.placeOrder('u1', -5)).rejects.toThrow(/check constraint/);
    const [{ id }] = (await pgdb.db.query<{ id: string }>(`SELECT id FROM tx_message`)).rows as [{ id: string }];
    expect(await status(id)).toBe('ROLLED_BACK');
    clock.advance(120_000);
    await settle();
    expect(await eventsOf(id)).toEqual([]);
  });

  it('4b: the local transaction fails and the rollback is lost too → check-back rolls it back', async () => {
    const settleErrors: string[] = [];
    const svc = orderService(
      client((m, u) => (isCall('rollback')(m, u) ? 'drop-request' : undefined), { onSettleError: (_e, op) => settleErrors.push(op) }),
    );
    await expect(svc.placeOrder('u1', 0)).rejects.toThrow(/check constraint/); // the caller sees its own error, not msgx's
    expect(settleErrors).toEqual(['rollback']);
    const [{ id }] = (await pgdb.db.query<{ id: string }>(`SELECT id FROM tx_message`)).rows as [{ id: string }];
    expect(await status(id)).toBe('PREPARED');
    clock.advance(30_000);
    await settle();
    expect(await status(id)).toBe('ROLLED_BACK');
    expect(await eventsOf(id)).toEqual([]);
  });

  it('5: the local transaction committed but the commit never reaches msgx → the order stands; check-back commits and it is delivered', async () => {
    const settleErrors: string[] = [];
    const svc = orderService(
      client((m, u) => (isCall('commit')(m, u) ? 'drop-request' : undefined), { onSettleError: (_e, op) => settleErrors.push(op) }),
    );
    const { txId } = await svc.placeOrder('u1', 10); // does not fail the caller
    expect(settleErrors).toEqual(['commit']);
    expect(await orderCount()).toBe(1);
    expect(await status(txId)).toBe('PREPARED');
    clock.advance(30_000);
    await settle();
    expect(await status(txId)).toBe('CONSUMED');
    expect(await points().balance('u1')).toBe(10);
    const trace = (await api('GET', `/admin/tx-messages/${txId}/trace`, undefined, { 'x-test-admin': 'yes' })).body.trace as any[];
    expect(trace.map((t) => t.kind)).toEqual(['prepare', 'check', 'commit', 'enqueue', 'sent', 'ack']);
    expect(trace[2].detail).toMatchObject({ via: 'check-back' });
  });

  it('6: msgx took the commit but its answer was lost → COMMITTED anyway; the repeat is a no-op; delivered once', async () => {
    const settleErrors: string[] = [];
    const svc = orderService(
      client((m, u) => (isCall('commit')(m, u) ? 'drop-response' : undefined), { onSettleError: (_e, op) => settleErrors.push(op) }),
    );
    const { txId } = await svc.placeOrder('u1', 10);
    expect(settleErrors).toEqual(['commit']);
    expect(await status(txId)).toBe('COMMITTED');
    expect(await client().commit(txId)).toEqual({ id: txId, status: 'COMMITTED' });
    clock.advance(30_000);
    await settle();
    expect(await eventsOf(txId)).toHaveLength(1);
    expect(await status(txId)).toBe('CONSUMED');
  });

  it('6b: msgx fails to record the commit (5xx) → still PREPARED; check-back commits it', async () => {
    await pgdb.db.query(
      `CREATE FUNCTION fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.status = 'COMMITTED' THEN RAISE EXCEPTION 'lost'; END IF; RETURN NEW; END $$`,
    );
    await pgdb.db.query(`CREATE TRIGGER fail_commit BEFORE UPDATE ON tx_message FOR EACH ROW EXECUTE FUNCTION fail_commit()`);
    let txId: string;
    try {
      ({ txId } = await orders.placeOrder('u1', 10));
      expect(await status(txId)).toBe('PREPARED');
    } finally {
      await pgdb.db.query(`DROP TRIGGER fail_commit ON tx_message; DROP FUNCTION fail_commit()`);
    }
    clock.advance(30_000);
    await settle();
    expect(await status(txId)).toBe('CONSUMED');
  });

  it('check-back: signed, redirects not followed, timeouts bounded; unanswered → DEAD "check-back exhausted" → resend → checked again', async () => {
    const seen: { url: string; sig?: string }[] = [];
    let mode: 'redirect' | 'hang' | 'garbage' | 'answer' = 'redirect';
    checkOverride = (req, res) => {
      seen.push({ url: req.url!, sig: req.headers['msgx-signature'] as string });
      if (mode === 'redirect') res.writeHead(302, { location: `${orderUrl}/tx-check?id=x` }).end();
      else if (mode === 'hang') setTimeout(() => res.writeHead(200).end('{"status":"COMMIT"}'), 1500);
      else if (mode === 'garbage') res.writeHead(200).end('<html>');
      else return false;
      return true;
    };
    const id = (await api('POST', '/v1/tx-messages', prepareBody({ checkAfterMs: 1, checkTimeoutMs: 300 }))).body.id;
    clock.advance(1);
    for (const m of ['redirect', 'hang', 'garbage'] as const) {
      mode = m;
      await checkBackOnce(ctx);
      clock.advance(60_000);
    }
    expect(seen.filter((s) => s.url.startsWith('/tx-check')).length).toBe(3); // the redirect was not followed
    expect(seen[0]!.url).toBe(`/tx-check?id=${id}`);
    // signed over the full URL msgx called, with a timestamp (docs/txmsg.md "Verifying msgx's signature"), verifiable by the producer
    expect(seen[0]!.sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifySignature(ctx.config.signingSecret!, `${orderUrl}${seen[0]!.url}`, seen[0]!.sig)).toMatchObject({ ok: true });
    const r = await row(id);
    expect(r).toMatchObject({ status: 'DEAD', dead_reason: 'check-back exhausted', checks: 3 });
    const trace = (await api('GET', `/admin/tx-messages/${id}/trace`, undefined, { 'x-test-admin': 'yes' })).body.trace as any[];
    expect(trace.filter((t) => t.kind === 'check').map((t) => t.detail.error)).toEqual([
      'HTTP 302 (redirects are not followed)',
      'timed out after 300 ms',
      'answer is not JSON',
    ]);
    expect((await deadTxMessages(pgdb.db, { phase: 'check' })).map((d) => d.id)).toEqual([id]);

    const resent = await api('POST', `/admin/tx-messages/${id}/resend`, undefined, { 'x-test-admin': 'yes', 'x-msgx-actor': 'alice' });
    expect(resent.body).toMatchObject({ id, status: 'PREPARED' });
    const audit = await pgdb.db.query<any>(`SELECT actor, action, detail FROM audit_log`);
    expect(audit.rows).toEqual([
      { actor: 'alice', action: 'txmsg.resend', detail: expect.objectContaining({ id, deadPhase: 'check', to: 'PREPARED' }) },
    ]);
    mode = 'answer'; // the order service's real answer: no order with this id → ROLLBACK
    await checkBackOnce(ctx);
    expect(await status(id)).toBe('ROLLED_BACK');
  });

  it('check-back is never made to an origin removed from the allow-list after prepare', async () => {
    const id = (await api('POST', '/v1/tx-messages', prepareBody({ checkAfterMs: 1 }))).body.id;
    clock.advance(1);
    let called = false;
    checkOverride = () => ((called = true), false);
    ctx.config.txmsg.checkAllowedOrigins = ['http://elsewhere.example'];
    try {
      await checkBackOnce(ctx);
    } finally {
      ctx.config.txmsg.checkAllowedOrigins = [orderUrl];
    }
    expect(called).toBe(false);
    expect((await row(id)).last_error).toMatch(/not called: .*not listed/);
  });
});

describe('failure points, consumer side', () => {
  async function committed(): Promise<string> {
    const { txId } = await orders.placeOrder('u1', 10);
    return txId;
  }

  it('7: the relay cannot deliver → no redelivery stacks up meanwhile; given up → DEAD → resend → delivered and consumed', async () => {
    const id = await committed();
    await relayOnce('fail');
    clock.advance(10 * 60_000);
    await redeliverOnce(ctx);
    expect(await eventsOf(id)).toHaveLength(1); // the relay's own retries own a pending delivery
    await relayOnce('giveUp');
    expect(await row(id)).toMatchObject({ status: 'DEAD', dead_phase: 'delivery', dead_reason: 'delivery failed: broker unreachable' });
    const resent = await api('POST', `/admin/tx-messages/${id}/resend`, undefined, { 'x-test-admin': 'yes' });
    expect(resent.body).toMatchObject({ status: 'COMMITTED' });
    expect((await row(id)).attempts).toBe(1); // a fresh schedule
    await settle();
    expect(await status(id)).toBe('CONSUMED');
    expect(await points().balance('u1')).toBe(10);
  });

  it('8: the record never reaches the consumer → redelivered after the schedule, same msgx-txmsg-id', async () => {
    const id = await committed();
    await relayOnce('ok', () => true); // published, then lost on the way
    expect(await status(id)).toBe('DELIVERED');
    clock.advance(59_000);
    expect((await redeliverOnce(ctx)).enqueued).toBe(0); // second delivery waits 1m
    clock.advance(1_000);
    expect((await redeliverOnce(ctx)).enqueued).toBe(1);
    expect(await status(id)).toBe('COMMITTED');
    await relayOnce();
    await consumeAll((r) => points().handle(r));
    expect(await status(id)).toBe('CONSUMED');
    const events = await eventsOf(id);
    expect(events.map((e) => e.headers['msgx-txmsg-id'])).toEqual([id, id]);
  });

  it('9: the consumer fails to process → no ack → redelivered → processed', async () => {
    const id = await committed();
    await relayOnce();
    await consumeAll(async () => {
      throw new Error('points db down');
    });
    expect(await status(id)).toBe('DELIVERED');
    clock.advance(60_000);
    await settle();
    expect(await status(id)).toBe('CONSUMED');
    expect(await points().balance('u1')).toBe(10);
  });

  it('10: the ack is lost → redelivered; the consumer dedupes and acks again; points applied once', async () => {
    const id = await committed();
    await relayOnce();
    const lossy = points(client((m, u) => (isCall('ack')(m, u) ? 'drop-request' : undefined)));
    await consumeAll((r) => lossy.handle(r));
    expect(await status(id)).toBe('DELIVERED');
    clock.advance(60_000);
    const results: { applied: boolean }[] = [];
    await settle(async (r) => results.push(await points().handle(r)));
    expect(results).toEqual([{ txId: id, applied: false }]);
    expect(await status(id)).toBe('CONSUMED');
    expect(await points().balance('u1')).toBe(10);
  });

  it('the consumer acks twice → the second is a no-op', async () => {
    const id = await committed();
    await relayOnce();
    expect(await client().ack(id)).toEqual({ id, status: 'CONSUMED' });
    expect(await client().ack(id)).toEqual({ id, status: 'CONSUMED' });
    const kinds = (await api('GET', `/admin/tx-messages/${id}/trace`, undefined, { 'x-test-admin': 'yes' })).body.trace.map(
      (t: any) => t.kind,
    );
    expect(kinds.slice(-2)).toEqual(['ack', 'noop']);
  });

  it('never acknowledged → delivered per schedule (0s, 1m, 4m), DEAD after the last, resend → consumed', async () => {
    const id = await committed();
    const at: number[] = [];
    const t0 = clock.now().getTime();
    for (let step = 0; step < 12; step++) {
      await redeliverOnce(ctx);
      if (await relayOnce()) at.push(clock.now().getTime() - t0);
      clock.advance(30_000);
    }
    expect(at).toEqual([0, 60_000, 300_000]);
    expect(await row(id)).toMatchObject({ status: 'DELIVERED', attempts: 3 });
    clock.advance(300_000);
    expect((await redeliverOnce(ctx)).dead).toBe(1);
    expect(await row(id)).toMatchObject({ status: 'DEAD', dead_phase: 'delivery', dead_reason: 'unacknowledged after 3 deliveries' });
    const resent = await api('POST', `/admin/tx-messages/${id}/resend`, undefined, { 'x-test-admin': 'yes' });
    expect(resent.body.status).toBe('COMMITTED');
    await settle();
    expect(await status(id)).toBe('CONSUMED');
    expect(await points().balance('u1')).toBe(10); // 4 deliveries, one credit
  });

  it('redelivers the messages nearest their limit first, bounded per round', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await orders.placeOrder(`u${i}`, 1)).txId);
    await relayOnce();
    clock.advance(60_000);
    // ids[2] gets its second delivery first, so it is nearer the limit
    await pgdb.db.query(`UPDATE tx_message SET attempts = 2 WHERE id = $1`, [ids[2]]);
    ctx.config.txmsg.redeliveryBatch = 1;
    try {
      expect((await redeliverOnce(ctx)).enqueued).toBe(1);
    } finally {
      ctx.config.txmsg.redeliveryBatch = 100;
    }
    expect(await status(ids[2]!)).toBe('COMMITTED');
    expect(await status(ids[0]!)).toBe('DELIVERED');
  });

  it('a relay without hooks wired is reconciled from msg_event by the redelivery round', async () => {
    const id = await committed();
    await pgdb.db.query(`UPDATE msg_event SET status = 'SENT', sent_at = $1`, [clock.now()]);
    expect((await redeliverOnce(ctx)).reconciled).toBe(1);
    expect(await status(id)).toBe('DELIVERED');
  });

  it('archives consumed and rolled-back messages after retention; GET and repeated acks still answer', async () => {
    const id = await committed();
    await settle();
    await api('POST', `/v1/tx-messages/${(await api('POST', '/v1/tx-messages', prepareBody())).body.id}/rollback`);
    expect((await archiveConsumed(ctx)).archived).toBe(0);
    clock.advance(ctx.config.txmsg.retentionMs);
    expect((await archiveConsumed(ctx)).archived).toBe(2);
    expect(await txCount()).toBe(0);
    expect((await api('GET', `/v1/tx-messages/${id}`)).body).toMatchObject({ id, status: 'CONSUMED', archived: true });
    expect(await client().ack(id)).toEqual({ id, status: 'CONSUMED' });
    expect((await api('POST', `/v1/tx-messages/${id}/rollback`)).status).toBe(409);
  });
});

describe('end to end on a compressed schedule (real time)', () => {
  it('100ms,200ms,300ms: three deliveries spaced by the schedule, then DEAD', async () => {
    const rt = makeContext(systemClock, { MSGX_TX_REDELIVERY_SCHEDULE: '100ms,200ms,300ms' });
    rt.config.txmsg.checkAllowedOrigins = [orderUrl];
    const rtUrl = await listen(msgxServer(rt));
    const svc = new OrderService({
      pool,
      msgx: new TxMessageClient({ baseUrl: rtUrl }),
      checkUrl: `${orderUrl}/tx-check`,
      signingSecret: 'test-secret',
    });
    const saved = ctx;
    ctx = rt; // relayOnce stamps with the context's clock
    const { txId } = await svc.placeOrder('u9', 3);
    const loop = setInterval(
      () =>
        void redeliverOnce(rt)
          .then(() => relayOnce())
          .catch(() => {}),
      10,
    );
    try {
      await waitFor(async () => (await status(txId)) === 'DEAD', { timeoutMs: 5_000, what: 'the message to die' });
    } finally {
      clearInterval(loop);
      ctx = saved;
    }
    const trace = (await api('GET', `/admin/tx-messages/${txId}/trace`, undefined, { 'x-test-admin': 'yes' })).body.trace as any[];
    const t = (k: string) => trace.filter((e) => e.kind === k).map((e) => new Date(e.at).getTime());
    const [commitAt] = t('commit');
    const enq = t('enqueue');
    const sent = t('sent');
    expect(enq).toHaveLength(3);
    expect(enq[0]! - commitAt!).toBeGreaterThanOrEqual(100);
    expect(enq[1]! - sent[0]!).toBeGreaterThanOrEqual(200);
    expect(enq[2]! - sent[1]!).toBeGreaterThanOrEqual(300);
    expect(t('dead')[0]! - sent[2]!).toBeGreaterThanOrEqual(300);
    expect((await eventsOf(txId)).map((e) => e.headers['msgx-txmsg-id'])).toEqual([txId, txId, txId]);
  });
});
