import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORDERS_DDL, OrderService } from '../../examples/order-points/orders.ts';
import { POINTS_DDL, PointsService, type ConsumedRecord } from '../../examples/order-points/points.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { Router } from '../../lib/http/router.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { dispatchOnce } from '../../lib/outbox/dispatcher.ts';
import type { OutRecord, Publisher, PublishResult } from '../../lib/outbox/types.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { TxMessageClient } from '../../lib/txmsg/client.ts';
import { checkBackOnce } from '../../lib/txmsg/checkBack.ts';
import { deadTxMessages } from '../../lib/txmsg/dead.ts';
import { txmsgDeadHook, txmsgSentHook } from '../../lib/txmsg/hooks.ts';
import { redeliverOnce } from '../../lib/txmsg/redeliver.ts';
import { txmsgRoutes } from '../../lib/txmsg/routes.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

// End to end through the real outbox dispatcher (lib/outbox/dispatcher.ts) with the txmsg hooks
// wired as the lead will wire them; an in-memory publisher plays the Kafka topic.

class TopicPublisher implements Publisher {
  readonly name = 'mem';
  log: OutRecord[] = [];
  down = false;
  async publish(records: OutRecord[]): Promise<PublishResult[]> {
    if (this.down) return records.map(() => ({ ok: false as const, error: 'broker unreachable' }));
    this.log.push(...records);
    return records.map(() => ({ ok: true as const }));
  }
  async close() {}
}

let pgdb: TestPg;
let pool: pg.Pool;
const servers: http.Server[] = [];

async function listen(server: http.Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface World {
  ctx: AppContext;
  clock: FakeClock;
  topic: TopicPublisher;
  msgx: TxMessageClient;
  orders: OrderService;
  orderUrl: string;
  msgxUrl: string;
}

async function world(env: Record<string, string>, topic = 'points'): Promise<World> {
  const clock = new FakeClock();
  const config = loadConfig({
    MSGX_TX_REDELIVERY_SCHEDULE: '0s,1m,4m',
    MSGX_TX_CHECK_MAX: '3',
    MSGX_TX_CHECK_INTERVAL: '60s',
    MSGX_SIGNING_SECRET: 'load-secret',
    ...env,
  });
  const ctx: AppContext = { config, db: pgdb.db, clock, log: silentLog, mailbox: {} as never, registry: {} as never };
  // The twin's own HTTP server over the transactional routes (loopback callers are operators).
  const msgxServer = await startHttpServer(ctx, new Router(txmsgRoutes), { port: 0 });
  servers.push(msgxServer);
  const msgxUrl = `http://127.0.0.1:${(msgxServer.address() as AddressInfo).port}`;
  const msgx = new TxMessageClient({ baseUrl: msgxUrl, retries: 0 });
  let orders!: OrderService;
  const orderUrl = await listen(http.createServer((req, res) => void orders.handleHttp(req, res)));
  config.txmsg.checkAllowedOrigins = [orderUrl];
  orders = new OrderService({ pool, msgx, checkUrl: `${orderUrl}/tx-check`, checkAfterMs: 30_000, signingSecret: 'load-secret', topic });
  return { ctx, clock, topic: new TopicPublisher(), msgx, orders, orderUrl, msgxUrl };
}

/** Every role until nothing more is due at this instant; the consumer reads the topic from its offset. */
async function roundAll(w: World, consumer: (r: ConsumedRecord & { key: string | null }) => Promise<unknown>, offset: { n: number }) {
  while ((await checkBackOnce(w.ctx)).checked > 0);
  for (;;) {
    const r = await redeliverOnce(w.ctx);
    if (r.enqueued + r.dead < w.ctx.config.txmsg.redeliveryBatch) break;
  }
  while ((await dispatchOnce(w.ctx, [w.topic], { onSent: txmsgSentHook, onDead: txmsgDeadHook })).more);
  while (offset.n < w.topic.log.length) {
    const rec = w.topic.log[offset.n++]!;
    await consumer(rec).catch(() => {});
  }
}

async function mapLimit<T, R>(items: T[], limit: number, fn: (t: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

const statusOf = async (ids: string[]) =>
  (await pgdb.db.query<{ id: string; status: string }>(`SELECT id, status FROM tx_message WHERE id = ANY($1)`, [ids])).rows;

beforeAll(async () => {
  pgdb = await freshPg();
  pool = new pg.Pool({ connectionString: pgdb.url, max: 10 });
  await pool.query(ORDERS_DDL);
  await pool.query(POINTS_DDL);
});

afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections?.();
    s.close();
  }
  await pool?.end();
  await pgdb?.drop();
});

describe('1,000 half messages through the dispatcher', () => {
  it('a third commit, a third roll back, a third abandoned: committed ones delivered, rolled-back never, unacked redelivered on schedule then dead, dead resent and consumed', async () => {
    const w = await world({});
    const points = new PointsService({ pool, msgx: w.msgx });
    // Consumers that never ack: they process but their acks are lost.
    const mute = new PointsService({
      pool,
      msgx: new TxMessageClient({
        baseUrl: w.msgxUrl,
        retries: 0,
        fetch: async () => {
          throw new TypeError('ack lost');
        },
      }),
    });
    const flakySeen = new Set<string>();
    const forgiven = new Set<string>();
    const consumer = async (r: ConsumedRecord & { key: string | null }) => {
      const id = r.headers['msgx-txmsg-id']!;
      if (r.key?.startsWith('mute') && !forgiven.has(id)) return mute.handle(r);
      if (r.key?.startsWith('flaky') && !flakySeen.has(id)) {
        flakySeen.add(id);
        throw new Error('points service hiccup');
      }
      return points.handle(r);
    };
    const offset = { n: 0 };

    // Prepare — 1000 messages over HTTP.
    const N = 1000;
    const kind = (i: number) => (['commit', 'rollback', 'abandon'] as const)[i % 3]!;
    const user = (i: number) => (i % 30 === 0 ? `mute-${i}` : i % 30 === 3 ? `flaky-${i}` : `u-${i}`);
    const outcome = await mapLimit(
      Array.from({ length: N }, (_, i) => i),
      16,
      async (i) => {
        if (kind(i) === 'commit') return { i, kind: 'commit', id: (await w.orders.placeOrder(user(i), i + 1)).txId, expectDelivered: true };
        if (kind(i) === 'rollback') {
          const err = await w.orders.placeOrder(user(i), -1).catch((e: Error) => e); // the local transaction fails
          expect(err).toBeInstanceOf(Error);
          const { rows } = await pgdb.db.query<{ id: string }>(`SELECT id FROM tx_message WHERE msg_key = $1`, [user(i)]);
          return { i, kind: 'rollback', id: rows[0]!.id, expectDelivered: false };
        }
        // Abandoned: the producer crashed after prepare. Half of them had committed their order.
        const msg = await w.msgx.prepare({
          topic: 'points',
          key: user(i),
          payload: { version: 1, orderRef: `ab-${i}`, userId: user(i), points: i + 1 },
          checkUrl: `${w.orderUrl}/tx-check`,
          checkAfterMs: 30_000,
        });
        const committed = i % 2 === 0;
        if (committed)
          await pool.query(`INSERT INTO ex_orders (order_ref, user_id, amount, txmsg_id) VALUES ($1, $2, $3, $4)`, [
            `ab-${i}`,
            user(i),
            i + 1,
            msg.id,
          ]);
        return { i, kind: 'abandon', id: msg.id, expectDelivered: committed };
      },
    );
    expect(new Set(outcome.map((o) => o.id)).size).toBe(N);
    const st0 = new Map((await statusOf(outcome.map((o) => o.id))).map((r) => [r.id, r.status]));
    expect(outcome.filter((o) => o.kind === 'commit').every((o) => st0.get(o.id) === 'COMMITTED')).toBe(true);
    expect(outcome.filter((o) => o.kind === 'rollback').every((o) => st0.get(o.id) === 'ROLLED_BACK')).toBe(true);
    expect(outcome.filter((o) => o.kind === 'abandon').every((o) => st0.get(o.id) === 'PREPARED')).toBe(true);

    // Run every role every 30 s of fake time for 12 minutes.
    for (let t = 0; t <= 24; t++) {
      await roundAll(w, consumer, offset);
      w.clock.advance(30_000);
    }

    const delivered = new Map<string, number>();
    for (const r of w.topic.log) delivered.set(r.headers['msgx-txmsg-id']!, (delivered.get(r.headers['msgx-txmsg-id']!) ?? 0) + 1);
    const final = new Map((await statusOf(outcome.map((o) => o.id))).map((r) => [r.id, r.status]));
    const isMute = (o: { i: number }) => user(o.i).startsWith('mute');

    for (const o of outcome) {
      if (!o.expectDelivered) {
        expect(delivered.has(o.id), `rolled back ${o.id} must never be delivered`).toBe(false);
        expect(final.get(o.id)).toBe('ROLLED_BACK');
      } else if (isMute(o)) {
        expect(delivered.get(o.id), `unacked ${o.i} delivered once per schedule entry`).toBe(3);
        expect(final.get(o.id)).toBe('DEAD');
      } else {
        expect(delivered.get(o.id), `committed ${o.i}`).toBeGreaterThanOrEqual(1);
        expect(final.get(o.id), `committed ${o.i}`).toBe('CONSUMED');
      }
    }
    // Every record went to the producer's topic with its key; the points landed exactly once.
    expect(w.topic.log.every((r) => r.topic === 'points' && r.headers['msgx-event-type'] === 'TX_MESSAGE')).toBe(true);
    const credited = await pool.query<{ n: number; total: number }>(
      `SELECT count(*)::int AS n, coalesce(sum(points), 0)::int AS total FROM ex_points`,
    );
    const shouldCredit = outcome.filter((o) => o.expectDelivered);
    expect(credited.rows[0]).toEqual({ n: shouldCredit.length, total: shouldCredit.reduce((s, o) => s + o.i + 1, 0) });

    // The unacked ones were delivered on schedule: 1m then 4m after the previous delivery.
    const mutes = outcome.filter((o) => o.expectDelivered && isMute(o));
    expect(mutes.length).toBeGreaterThan(10);
    for (const o of mutes) {
      const trace = (
        await pgdb.db.query<{ kind: string; at: Date }>(`SELECT kind, at FROM tx_message_log WHERE tx_id = $1 ORDER BY seq`, [o.id])
      ).rows;
      const at = (k: string) => trace.filter((e) => e.kind === k).map((e) => e.at.getTime());
      const [sent, enq] = [at('sent'), at('enqueue')];
      expect(enq[1]! - sent[0]!).toBeGreaterThanOrEqual(60_000);
      expect(enq[1]! - sent[0]!).toBeLessThanOrEqual(90_000);
      expect(enq[2]! - sent[1]!).toBeGreaterThanOrEqual(240_000);
      expect(enq[2]! - sent[1]!).toBeLessThanOrEqual(270_000);
      expect(at('dead')[0]! - sent[2]!).toBeGreaterThanOrEqual(240_000);
    }
    const dead = await deadTxMessages(pgdb.db, { phase: 'delivery', limit: 1000 });
    expect(dead.map((d) => d.id).sort()).toEqual(mutes.map((o) => o.id).sort());
    expect(dead[0]).toMatchObject({ deadReason: 'unacknowledged after 3 deliveries' });

    // An operator resends one; this time its consumer acks.
    const revived = mutes[0]!.id;
    forgiven.add(revived);
    const res = await fetch(`${w.msgxUrl}/admin/tx-messages/${revived}/resend`, { method: 'POST' });
    expect(await res.json()).toMatchObject({ id: revived, status: 'COMMITTED' });
    await roundAll(w, consumer, offset);
    expect((await statusOf([revived]))[0]!.status).toBe('CONSUMED');
    expect(w.topic.log.filter((r) => r.headers['msgx-txmsg-id'] === revived)).toHaveLength(4);
  }, 240_000); // a load test: 1,000 messages, bounded by work on a shared 2-core machine, not by a target

  it('a broker outage the dispatcher gives up on makes the message DEAD with the relay error; resend delivers it', async () => {
    const w = await world(
      { MSGX_DELIVERY_MAX_RETRY_COUNT: '2', MSGX_DELIVERY_INITIAL_BACKOFF: '1s', MSGX_DELIVERY_MAX_BACKOFF: '2s' },
      'points-outage',
    );
    const points = new PointsService({ pool, msgx: w.msgx });
    const offset = { n: 0 };
    const { txId } = await w.orders.placeOrder('outage', 7);
    w.topic.down = true;
    for (let t = 0; t < 10; t++) {
      await roundAll(w, (r) => points.handle(r), offset);
      w.clock.advance(2_000);
    }
    const [row] = (await pgdb.db.query<any>(`SELECT status, dead_phase, dead_reason FROM tx_message WHERE id = $1`, [txId])).rows;
    expect(row).toMatchObject({ status: 'DEAD', dead_phase: 'delivery' });
    expect(row.dead_reason).toMatch(/^delivery failed: .*broker unreachable/);
    w.topic.down = false;
    await fetch(`${w.msgxUrl}/admin/tx-messages/${txId}/resend`, { method: 'POST' });
    await roundAll(w, (r) => points.handle(r), offset);
    expect((await statusOf([txId]))[0]!.status).toBe('CONSUMED');
  });
});
