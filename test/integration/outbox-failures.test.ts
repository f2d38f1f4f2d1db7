import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig, type Config } from '../../lib/config/config.ts';
import { dispatcherRole } from '../../lib/jobs/dispatcherRole.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import type { DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { WebhookPublisher } from '../../lib/outbox/publishers/webhook.ts';
import { deadEvents } from '../../lib/outbox/queries.ts';
import type { Publisher } from '../../lib/outbox/types.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import { createTopics, randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, waitFor, type TestPg } from '../helpers/services.ts';

// Issue 13 on the real broker (auto-create off) and a real HTTP receiver: a failure that belongs
// to one event spends its attempts, the event ends DEAD and the events behind it are delivered in
// order. What was delivered is judged by reading the topic / the receiver, not msgx's tables.

const { kafkaBrokers } = serviceUrls();
let pg: TestPg;
beforeAll(async () => {
  pg = await freshPg();
});
afterAll(async () => {
  await pg?.drop();
});

function setup(env: Record<string, string> = {}) {
  const config: Config = loadConfig({
    MSGX_KAFKA_BROKERS: kafkaBrokers.join(','),
    MSGX_DELIVERY_INITIAL_BACKOFF: '100ms',
    MSGX_DELIVERY_MAX_BACKOFF: '400ms',
    MSGX_DELIVERY_MAX_RETRY_COUNT: '3',
    MSGX_DELIVERY_PUBLISH_TIMEOUT: '1500ms',
    MSGX_DELIVERY_LEASE: '10s',
    MSGX_DELIVERY_POLL_INTERVAL: '50ms',
    ...env,
  });
  const ctx: DispatchContext = { db: pg.db, config, clock: systemClock, log: silentLog };
  return { config, ctx };
}

async function openCount(target: string): Promise<number> {
  const r = await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM msgx_outbox_open(now()) WHERE target = $1`, [target]);
  return r.rows[0]!.n;
}

/** Runs the dispatcher role on `publishers` for `target` until `until` holds. */
async function deliver(ctx: DispatchContext, publishers: Publisher[], target: string, until: () => Promise<boolean>, what: string) {
  const stop = new AbortController();
  const loop = runWorker(ctx, { ...dispatcherRole(ctx, publishers, { targets: [target] }), unlocked: true, signal: stop.signal });
  try {
    await waitFor(until, { timeoutMs: 30_000, what });
  } finally {
    stop.abort();
    await loop;
  }
}

describe('a failure that belongs to the event spends its attempts', () => {
  test('a record larger than the topic allows ends DEAD after the budget; the events behind it are delivered in order', async () => {
    const { config, ctx } = setup();
    const topic = randomTopic('msgx-small');
    await createTopics(kafkaBrokers, [{ topic, configEntries: [{ name: 'max.message.bytes', value: '2048' }] }]);
    const kafka = new KafkaPublisher(config.kafka, { publishTimeoutMs: config.outbox.publishTimeoutMs });
    const values = ['small-1', 'x'.repeat(10_000), 'small-2', 'small-3'];
    const ids = await enqueueEvents(
      pg.db,
      values.map((v) => ({ target: `tx:${topic}`, key: 'k', type: 'T', value: v })),
    );
    try {
      await deliver(ctx, [kafka], `tx:${topic}`, async () => (await openCount(`tx:${topic}`)) === 0, 'the target to drain');
    } finally {
      await kafka.close();
    }
    const got = await readTopicToEnd(kafkaBrokers, topic); // to the end: the dead one never arrived, none twice
    expect(got.map((r) => r.value)).toEqual(['small-1', 'small-2', 'small-3']);
    const dead = await deadEvents(pg.db, { target: `tx:${topic}` });
    expect(dead.map((d) => d.eventId)).toEqual([ids[1]]);
    expect(dead[0]!.attempts).toBe(3);
    expect(dead[0]!.lastError).toMatch(/MESSAGE_TOO_LARGE|RECORD_LIST_TOO_LARGE/);
  });

  test('a webhook that times out for one payload only: that event DEAD, the ones behind it delivered in order', async () => {
    const { ctx } = setup({ MSGX_DELIVERY_PUBLISH_TIMEOUT: '800ms' });
    const received: number[] = [];
    const hanging: ServerResponse[] = [];
    const srv = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        if (req.method !== 'POST') return void res.writeHead(200).end();
        const n = JSON.parse(JSON.parse(body).value).n as number;
        if (n === 2) return void hanging.push(res); // this payload never gets an answer
        received.push(n);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}/hook`;
    const hook = new WebhookPublisher({ url, timeoutMs: 800 });
    const ids = await enqueueEvents(
      pg.db,
      [1, 2, 3, 4, 5].map((n) => ({ target: 'tx:hook', key: 'k', type: 'T', value: { n } })),
    );
    try {
      await deliver(ctx, [hook], 'tx:hook', async () => (await openCount('tx:hook')) === 0, 'the webhook target to drain');
    } finally {
      for (const r of hanging) r.destroy();
      srv.closeAllConnections();
      srv.close();
    }
    expect(received).toEqual([1, 3, 4, 5]);
    const dead = await deadEvents(pg.db, { target: 'tx:hook' });
    expect(dead.map((d) => d.eventId)).toEqual([ids[1]]);
    expect(dead[0]!.attempts).toBe(3);
    expect(dead[0]!.lastError).toMatch(/timeout/);
  });
});
