import http from 'node:http';
import pg from 'pg';
import { TxMessageClient } from '../../lib/txmsg/client.ts';
import { consumeKafka, tailFileSink } from './consume.ts';
import { ORDERS_DDL, OrderService } from './orders.ts';
import { POINTS_DDL, PointsService } from './points.ts';

/**
 * The transactional-message example (docs/txmsg.md) against a running msgx twin: an order service that grants points through
 * transactional messages, and the points service that consumes them. See README.md.
 */
const env = process.env;
const msgxUrl = env.MSGX_URL ?? 'http://127.0.0.1:8080';
const port = Number(env.EXAMPLE_PORT ?? 7001);
const pgUrl = env.EXAMPLE_PG_URL ?? env.MSGX_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const topic = env.EXAMPLE_TOPIC ?? 'points';
const brokers = (env.MSGX_KAFKA_BROKERS ?? '').split(',').filter(Boolean);

const pool = new pg.Pool({ connectionString: pgUrl });
await pool.query(ORDERS_DDL);
await pool.query(POINTS_DDL);

const msgx = new TxMessageClient({
  baseUrl: msgxUrl,
  onSettleError: (err, op, id) => console.warn(`orders: ${op} of ${id} not confirmed (${err.message}); msgx will check back`),
});
const orders = new OrderService({
  pool,
  msgx,
  topic,
  checkUrl: `http://127.0.0.1:${port}/tx-check`,
  checkAfterMs: Number(env.EXAMPLE_CHECK_AFTER_MS ?? 10_000),
  signingSecret: env.MSGX_SIGNING_SECRET,
});
const points = new PointsService({ pool, msgx });

const server = http.createServer((req, res) => void orders.handleHttp(req, res));
await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
console.log(`orders: check-back endpoint on http://127.0.0.1:${port}/tx-check`);

const handle = async (rec: Parameters<typeof points.handle>[0]) => {
  const r = await points.handle(rec);
  console.log(`points: ${r.applied ? 'credited' : 'duplicate, acked again'} ${r.txId}`);
};
const stop: () => void | Promise<void> = brokers.length
  ? await consumeKafka(brokers, topic, handle)
  : tailFileSink(env.MSGX_EVENTS_DIR ?? '.msgx/events', topic, handle);

const placed: string[] = [];
for (const [user, amount] of [
  ['alice', 30],
  ['bob', 20],
  ['carol', -5],
] as const) {
  try {
    const { txId } = await orders.placeOrder(user, amount);
    placed.push(txId);
    console.log(`orders: ${user} ordered for ${amount}, message ${txId}`);
  } catch (err) {
    console.log(`orders: ${user}'s order failed (${(err as Error).message}); its message is rolled back`);
  }
}

const report = setInterval(async () => {
  for (const id of placed) {
    const m = await msgx.get(id).catch(() => undefined);
    console.log(`msgx: ${id} ${m?.status ?? '?'} (deliveries ${m?.attempts ?? '?'})`);
  }
}, 3_000);

process.on('SIGINT', async () => {
  clearInterval(report);
  await stop();
  server.close();
  await pool.end();
  process.exit(0);
});
