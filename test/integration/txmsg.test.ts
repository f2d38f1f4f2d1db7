import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ORDERS_DDL, OrderService } from '../../examples/order-points/orders.ts';
import { POINTS_DDL, PointsService, type ConsumedRecord } from '../../examples/order-points/points.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { Router } from '../../lib/http/router.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { FakeClock, systemClock, type Clock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/shared/context.ts';
import { TxMessageClient, TxRejectedError, TxUnavailableError } from '../../lib/txmsg/client.ts';
import {
  archiveConsumed, checkBackOnce, deadTxMessages, redeliverOnce, txmsgDeadHook, txmsgRoutes, txmsgSentHook,
} from '../../lib/txmsg/index.ts';
import { freshPg, waitFor, type TestPg } from '../helpers/services.ts';

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
        method: req.method ?? 'GET', path: u.pathname, headers, query: Object.fromEntries(u.searchParams),
        body: Buffer.concat(chunks).toString('utf8'), params: {}, isAdmin: headers['x-test-admin'] === 'yes',
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

function client(rule?: (method: string, url: string) => Fault | undefined, extra: Partial<ConstructorParameters<typeof TxMessageClient>[0]> = {}) {
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
  const r = await pgdb.db.query<{ event_id: number; value: string; headers: Record<string, string>; source_kind: string; source_id: string }>(
    `SELECT event_id, value, headers, source_kind, source_id FROM msg_event WHERE status = 'PENDING' AND target LIKE 'tx:%' ORDER BY event_id`,
  );
  if (mode === 'fail' || r.rows.length === 0) return 0;
  const now = ctx.clock.now();
  const settled = r.rows.map((e) => ({ eventId: e.event_id, sourceKind: e.source_kind, sourceId: e.source_id, error: 'broker unreachable' }));
  await pgdb.db.tx(async (tx) => {
    const status = mode === 'ok' ? 'SENT' : 'DEAD';
    await tx.query(`UPDATE msg_event SET status = $2, sent_at = $3, last_error = $4 WHERE event_id = ANY($1::bigint[])`, [
      r.rows.map((e) => e.event_id), status, now, mode === 'ok' ? null : 'broker unreachable',
    ]);
    if (mode === 'ok') await txmsgSentHook(tx, settled, now);
    else await txmsgDeadHook(tx, settled, now);
  });
  if (mode === 'ok') for (const e of r.rows) if (!lose?.(e.event_id)) topicLog.push({ eventId: e.event_id, value: e.value, headers: e.headers });
  return r.rows.length;
}

/** The consumer polls the topic from its offset; `handle` may throw (then no ack, no commit). */
async function consumeAll(handle: (r: ConsumedRecord) => Promise<unknown>): Promise<void> {
  while (consumed < topicLog.length) {
    const rec = topicLog[consumed++]!;
    await handle(rec).catch(() => {});
  }
}

const status = async (id: string) => (await pgdb.db.query<{ status: string }>(`SELECT status FROM tx_message WHERE id = $1`, [id])).rows[0]?.status;
const row = async (id: string) => (await pgdb.db.query<Record<string, any>>(`SELECT * FROM tx_message WHERE id = $1`, [id])).rows[0]!;
const eventsOf = async (id: string) =>
  (await pgdb.db.query<Record<string, any>>(`SELECT * FROM msg_event WHERE source_kind = 'txmsg' AND source_id = $1 ORDER BY event_id`, [id])).rows;
const txCount = async () => (await pgdb.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tx_message`)).rows[0]!.n;

async function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(msgxUrl + path, {
    method, headers: { 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

const prepareBody = (extra: Record<string, unknown> = {}) => ({
  topic: 'points', key: 'u1', payload: { version: 1, orderRef: 'r1', userId: 'u1', points: 5 }, checkUrl: `${orderUrl}/tx-check`, checkAfterMs: 30_000, ...extra,
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
  for (const s of servers) s.closeAllConnections?.(), s.close();
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
      id: r.body.id, topic: 'points', key: null, status: 'PREPARED', attempts: 0, checks: 0,
      createdAt: clock.now().toISOString(), headers: { 'x-trace': 't1' },
      nextCheckAt: new Date(clock.now().getTime() + 30_000).toISOString(),
    });
    expect(await eventsOf(r.body.id)).toEqual([]); // invisible to consumers until committed
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
    const all = await Promise.all(Array.from({ length: 8 }, () => api('POST', '/v1/tx-messages', prepareBody(), { 'idempotency-key': 'k-race' })));
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
      target: 'tx:points', partition_key: 'u1', event_type: 'TX_MESSAGE', status: 'PENDING',
      value: JSON.stringify(prepareBody().payload), headers: { 'x-trace': 't1', 'msgx-txmsg-id': body.id },
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
    const id = (await api('POST', '/v1/tx-messages', prepareBody({ checkAfterMs: 0 }))).body.id as string;
    const kill = async () => {
      checkOverride = (_req, res) => (res.writeHead(200).end('{"status":"UNKNOWN"}'), true);
      for (let i = 0; i < 3; i++) await checkBackOnce(ctx), clock.advance(60_000);
      checkOverride = undefined;
    };
    switch (state) {
      case 'PREPARED': return id;
      case 'ROLLED_BACK': await api('POST', `/v1/tx-messages/${id}/rollback`); break;
      case 'DEAD(check)': await kill(); break;
      default: {
        await api('POST', `/v1/tx-messages/${id}/commit`);
        if (state === 'COMMITTED') break;
        if (state === 'DEAD(delivery)') { await relayOnce('giveUp'); break; }
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
        if (code === 409) expect(r.body).toMatchObject({ error: 'illegal_transition', state: state.replace(/\(.*/, ''), detail: expect.any(String) });
        else expect(r.body).toMatchObject({ id, status: after });
        expect(await status(id)).toBe(after);
      });
    }
  }
});
