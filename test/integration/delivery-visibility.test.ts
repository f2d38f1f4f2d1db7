import type { Server } from 'node:http';
import kafkajs from 'kafkajs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { renderStatus } from '../../lib/cli/status.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { dispatcherRole } from '../../lib/jobs/dispatcherRole.ts';
import { kafkaHealth } from '../../lib/outbox/health.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { buildContext, closeContext } from '../../lib/app/buildContext.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { startRoles } from '../../lib/twin/startRoles.ts';
import { createTopics, memoryLog, randomTopic } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, type TestPg } from '../helpers/services.ts';

// Issue 13, "unknown destinations refused up front" and "errors visible where people look", over
// real HTTP against the real broker (auto-create off): what a producer and an operator see.

const { kafkaBrokers } = serviceUrls();
let pg: TestPg;
const open: { ctx: AppContext; server: Server }[] = [];

beforeAll(async () => {
  pg = await freshPg();
});
afterAll(async () => {
  for (const o of open) {
    o.server.close();
    await closeContext(o.ctx);
  }
  await pg?.drop();
});

async function msgx(env: Record<string, string> = {}) {
  const config = loadConfig({
    MSGX_RUNTIME: 'twin',
    MSGX_PG_URL: pg.url,
    MSGX_KAFKA_BROKERS: kafkaBrokers.join(','),
    MSGX_TOPIC_MSG: randomTopic('msgx-msg'),
    MSGX_TOPIC_SCHD: randomTopic('msgx-schd'),
    MSGX_TX_CHECK_ALLOWED_ORIGINS: 'http://127.0.0.1:9',
    MSGX_LOG_LEVEL: 'SILENT',
    ...env,
  });
  const ctx = await buildContext(config);
  const server = await startHttpServer(ctx, buildRouter(kafkaHealth(ctx)), { port: 0 });
  open.push({ ctx, server });
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(base + path, {
      method,
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  return { ctx, config, call };
}

async function createTopic(topic: string) {
  await createTopics(kafkaBrokers, [{ topic }]);
}

const txCount = async () => (await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tx_message`)).rows[0]!.n;
const prepareBody = (topic: string) => ({ topic, key: 'k', payload: { a: 1 }, checkUrl: 'http://127.0.0.1:9/check' });

describe('prepare refuses a destination msgx could never deliver to', () => {
  test('a topic the cluster does not have: 422 unknown_topic naming it, nothing stored; once created, accepted', async () => {
    const { call } = await msgx();
    const topic = randomTopic('msgx-nope');
    const before = await txCount();
    const r = await call('POST', '/v1/tx-messages', prepareBody(topic));
    expect(r.status).toBe(422);
    expect(r.body.error).toBe('unknown_topic');
    expect(r.body.detail).toContain(topic);
    expect(await txCount()).toBe(before);

    // The cached topic list is refreshed on a miss: a topic created a moment ago is found.
    await createTopic(topic);
    const ok = await call('POST', '/v1/tx-messages', prepareBody(topic));
    expect(ok.status).toBe(201);
    expect(ok.body.status).toBe('PREPARED');
    expect(await txCount()).toBe(before + 1);
  });

  test('MSGX_TX_TOPICS narrows the topics: another existing topic is refused naming the list', async () => {
    const listed = randomTopic('msgx-listed');
    const other = randomTopic('msgx-other');
    await createTopic(other);
    const { call } = await msgx({ MSGX_TX_TOPICS: `${listed},orders.events` });
    const before = await txCount();
    const r = await call('POST', '/v1/tx-messages', prepareBody(other));
    expect(r.status).toBe(403);
    expect(r.body.error).toBe('topic_not_allowed');
    expect(r.body.detail).toContain('MSGX_TX_TOPICS');
    expect(r.body.detail).toContain(listed);
    // Listed but not on the cluster: still unknown.
    const missing = await call('POST', '/v1/tx-messages', prepareBody(listed));
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toContain(listed);
    expect(await txCount()).toBe(before);
  });

  test("msgx's own topics are refused: a producer cannot write into the flight events (msgx.msg) or the compacted state (msgx.schd)", async () => {
    const { config, call } = await msgx();
    // They exist on the cluster (msgx creates them), so only this rule stands in the way.
    await createTopic(config.outbox.topicMsg);
    await createTopic(config.outbox.topicSchd);
    const before = await txCount();
    for (const [topic, variable] of [
      [config.outbox.topicMsg, 'MSGX_TOPIC_MSG'],
      [config.outbox.topicSchd, 'MSGX_TOPIC_SCHD'],
    ] as const) {
      const r = await call('POST', '/v1/tx-messages', { ...prepareBody(topic), key: '1001' });
      expect(r.status).toBe(403);
      expect(r.body.error).toBe('topic_not_allowed');
      expect(r.body.detail).toContain(topic);
      expect(r.body.detail).toContain(variable);
    }
    expect(await txCount()).toBe(before);
  });

  test('MSGX_TX_TOPICS must be topic names', () => {
    expect(() => loadConfig({ MSGX_TX_TOPICS: 'orders,bad topic!' })).toThrow(/MSGX_TX_TOPICS: must be a comma list of Kafka topic names/);
  });
});

describe('an outbox target whose topic is missing is reported, not discovered by retrying', () => {
  test('/health answers 503 naming the topic, /admin/stats and `msgx status` list it; ok again once it exists', async () => {
    const { ctx, call } = await msgx();
    await createTopic(ctx.config.outbox.topicMsg);
    await createTopic(ctx.config.outbox.topicSchd);
    const topic = randomTopic('msgx-gone');
    await enqueueEvents(pg.db, [{ target: `tx:${topic}`, key: 'k', type: 'T', value: 'x' }]);

    const h = await call('GET', '/health');
    expect(h.status).toBe(503);
    expect(h.body.checks['kafka-topics']).toContain(topic);
    expect(h.body.checks.kafka).toBe('ok');

    const stats = await call('GET', '/admin/stats');
    expect(stats.body.missingTopics).toEqual([{ target: `tx:${topic}`, topic, open: 1 }]);
    const text = renderStatus(stats.body as never);
    expect(text).toMatch(new RegExp(`MISSING KAFKA TOPICS[\\s\\S]*${topic.replaceAll('.', '\\.')}`));

    await createTopic(topic);
    const again = await call('GET', '/health');
    expect(again.body.checks['kafka-topics']).toBe('ok');
    await pg.db.query(`DELETE FROM msg_event WHERE target = $1`, [`tx:${topic}`]);
  });

  test('the twin says so at start in one WARN line, and creates the MSGX_TX_TOPICS topics', async () => {
    const listed = randomTopic('msgx-listed');
    const gone = randomTopic('msgx-gone');
    const { ctx } = await msgx({ MSGX_TX_TOPICS: listed });
    await enqueueEvents(pg.db, [{ target: `tx:${gone}`, key: 'k', type: 'T', value: 'x' }]);
    const log = memoryLog();
    const stop = new AbortController();
    stop.abort(); // the roles stop at once; the start-up checks are what this test is about
    const roles = await startRoles({ ...ctx, log }, stop.signal);
    await roles.done;
    await roles.close();
    const warn = log.lines.filter((l) => l.level === 'warn' && String(l.line.message).startsWith('Kafka topics missing'));
    expect(warn).toHaveLength(1);
    expect(String(warn[0]!.line.message)).toContain(gone);
    expect(String(warn[0]!.line.message)).not.toContain(listed);
    const admin = new kafkajs.Kafka({ brokers: kafkaBrokers, logLevel: kafkajs.logLevel.NOTHING }).admin();
    await admin.connect();
    const md = await admin.fetchTopicMetadata({ topics: [listed] });
    await admin.disconnect();
    expect(md.topics[0]!.partitions).toHaveLength(ctx.config.outbox.topicPartitions);
    await pg.db.query(`DELETE FROM msg_event WHERE target = $1`, [`tx:${gone}`]);
  });
});

describe('a target that does not move is listed', () => {
  test('a head older than MSGX_STALE_TARGET_AFTER is in /admin/stats staleTargets and in `msgx status`, with its last error', async () => {
    const { call } = await msgx({ MSGX_STALE_TARGET_AFTER: '10m' });
    const topic = randomTopic('msgx-slow');
    await createTopic(topic);
    const old = new Date(Date.now() - 20 * 60_000);
    const [id] = await enqueueEvents(pg.db, [{ target: `tx:${topic}`, key: 'k', type: 'T', value: 'x' }], { now: old });
    await pg.db.query(`UPDATE msg_event SET attempts = 2, last_error = 'kafka: MESSAGE_TOO_LARGE: x' WHERE event_id = $1`, [id]);
    await enqueueEvents(pg.db, [{ target: 'tx:fresh', key: 'k', type: 'T', value: 'x' }]);

    const stats = await call('GET', '/admin/stats');
    expect(stats.body.staleAfterSeconds).toBe(600);
    expect(stats.body.staleTargets.map((t: { target: string }) => t.target)).toEqual([`tx:${topic}`]);
    expect(stats.body.staleTargets[0]).toMatchObject({
      headEventId: id,
      headAttempts: 2,
      reason: 'kafka: MESSAGE_TOO_LARGE: x',
      stalledSeconds: null,
    });
    expect(stats.body.staleTargets[0].ageSeconds).toBeGreaterThanOrEqual(1200);
    const text = renderStatus(stats.body as never);
    expect(text).toMatch(/STALE TARGETS \(head older than 600s/);
    expect(text).toContain('MESSAGE_TOO_LARGE');
    await pg.db.query(`DELETE FROM msg_event WHERE target IN ($1, 'tx:fresh')`, [`tx:${topic}`]);
  });
});

describe('a delivery that fails shows why on every retry', () => {
  test('GET /v1/tx-messages/{id} and its trace carry lastError while the message is still being retried', async () => {
    const { ctx, call } = await msgx({ MSGX_DELIVERY_MAX_RETRY_COUNT: '5', MSGX_DELIVERY_INITIAL_BACKOFF: '1m' });
    const topic = randomTopic('msgx-tiny');
    await createTopics(kafkaBrokers, [{ topic, configEntries: [{ name: 'max.message.bytes', value: '1024' }] }]);
    const prepared = await call('POST', '/v1/tx-messages', { ...prepareBody(topic), payload: 'x'.repeat(5000) });
    expect(prepared.status).toBe(201);
    const id = prepared.body.id as string;
    expect((await call('POST', `/v1/tx-messages/${id}/commit`)).body.status).toBe('COMMITTED');

    const kafka = new KafkaPublisher(ctx.config.kafka, { publishTimeoutMs: ctx.config.outbox.publishTimeoutMs });
    try {
      await dispatcherRole(ctx, [kafka], { targets: [`tx:${topic}`] }).step();
    } finally {
      await kafka.close();
    }
    const got = await call('GET', `/v1/tx-messages/${id}`);
    expect(got.body.status).toBe('COMMITTED'); // one attempt of five spent: still being retried
    expect(got.body.lastError).toMatch(/MESSAGE_TOO_LARGE|RECORD_LIST_TOO_LARGE/);
    const trace = await call('GET', `/admin/tx-messages/${id}/trace`);
    expect(trace.body.message.lastError).toBe(got.body.lastError);
  });
});

describe('dead events are counted for every target, also one with nothing left to deliver', () => {
  test('/admin/stats deadEvents and `msgx status` list a target whose events all died', async () => {
    const { call } = await msgx();
    const target = `tx:${randomTopic('msgx-deadonly')}`;
    await enqueueEvents(pg.db, [
      { target, key: 'a', type: 'T', value: '1' },
      { target, key: 'b', type: 'T', value: '2' },
    ]);
    // Arrange: both gave up (as after their retries); nothing of this target is open.
    await pg.db.query(`UPDATE msg_event SET status = 'DEAD', dead_at = now(), last_error = 'refused' WHERE target = $1`, [target]);

    const stats = await call('GET', '/admin/stats');
    expect(stats.body.events.map((e: { target: string }) => e.target)).not.toContain(target);
    expect(stats.body.deadEvents[target]).toBe(2);
    const row = renderStatus(stats.body as never)
      .split('\n')
      .find((l) => l.includes(target));
    // Its row, column by column: target, pending, oldest, dead, state (no last error).
    expect(row?.trim().split(/\s+/)).toEqual([target, '0', '-', '2', 'ok']);
  });
});
