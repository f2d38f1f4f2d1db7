import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import kafkajs from 'kafkajs';
import { loadConfig, type Config } from '../../lib/config/config.ts';
import { dispatcherRole } from '../../lib/jobs/dispatcherRole.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { dispatchOnce, type DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents, type NewEvent } from '../../lib/outbox/enqueue.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { WebhookPublisher } from '../../lib/outbox/publishers/webhook.ts';
import { verifySignature } from '../../lib/shared/signature.ts';
import { ensureTopics } from '../../lib/outbox/topics.ts';
import { deadEvents, pendingByTarget } from '../../lib/outbox/queries.ts';
import type { OutRecord, Publisher, PublishResult } from '../../lib/outbox/types.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import { freshPg, serviceUrls, waitFor, type TestPg } from '../helpers/services.ts';
import { createTopics, randomTopic, readTopicToEnd, type ReadRecord } from '../helpers/kafka.ts';

// Integration: real PostgreSQL (own database), the real Kafka broker (own random topics), real
// time with short backoffs. Unavailability is simulated with publishers pointed at a dead port;
// the shared broker is never stopped.

const { kafkaBrokers } = serviceUrls();
let pg: TestPg;
beforeAll(async () => {
  pg = await freshPg();
});
afterAll(async () => {
  await pg?.drop();
});

function setup(env: Record<string, string> = {}) {
  const topicMsg = randomTopic('msgx-msg');
  const topicSchd = randomTopic('msgx-schd');
  const topicOffsets = randomTopic('msgx-offsets');
  const config: Config = loadConfig({
    MSGX_TOPIC_OFFSETS: topicOffsets,
    MSGX_KAFKA_BROKERS: kafkaBrokers.join(','),
    MSGX_TOPIC_MSG: topicMsg,
    MSGX_TOPIC_SCHD: topicSchd,
    MSGX_TOPIC_PARTITIONS: '3',
    MSGX_DELIVERY_INITIAL_BACKOFF: '100ms',
    MSGX_DELIVERY_MAX_BACKOFF: '1s',
    MSGX_DELIVERY_MAX_RETRY_COUNT: '20',
    MSGX_DELIVERY_PUBLISH_TIMEOUT: '2s',
    MSGX_DELIVERY_LEASE: '5s',
    MSGX_DELIVERY_POLL_INTERVAL: '50ms',
    MSGX_SCHD_FLUSH_PERIOD: '200ms',
    ...env,
  });
  const ctx: DispatchContext = { db: pg.db, config, clock: systemClock, log: silentLog };
  return { config, ctx, topicMsg, topicSchd, topicOffsets };
}

/** A port nothing listens on: bound, then closed again. */
async function deadPort(): Promise<number> {
  const srv: Server = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

async function openCount(target?: string): Promise<number> {
  const r = await pg.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM msgx_outbox_open(now()) WHERE $1::text IS NULL OR target = $1`,
    [target ?? null],
  );
  return r.rows[0]!.n;
}

/** A target's head as /admin/stats shows it (its attempts, last error, stall); undefined when nothing is open. */
async function headOf(target: string) {
  return (await pendingByTarget(pg.db, new Date())).find((t) => t.target === target);
}

/**
 * Per partition and key, the event ids in the order a consumer sees them, after dropping repeated
 * msgx-event-ids (the consumer's dedupe): they must rise.
 */
function assertKeyOrder(records: ReadRecord[]): void {
  const seen = new Set<string>();
  const last = new Map<string, number>();
  for (const r of records) {
    const id = r.headers['msgx-event-id']!;
    if (seen.has(id)) continue;
    seen.add(id);
    const k = `${r.partition}/${r.key}`;
    const n = Number(id);
    const prev = last.get(k) ?? 0;
    if (n <= prev) throw new Error(`key ${k}: event ${n} after ${prev}`);
    last.set(k, n);
  }
}

/** Key → the sequence numbers in the order given, keys sorted (so two maps compare whole). */
function byKey(items: { key: string; i: number }[]): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const { key, i } of items) (out[key] ??= []).push(i);
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

describe('topics', () => {
  test('ensureTopics creates msg, a compacted schd and (exactly once) a compacted offsets topic with the configured partitions, idempotently', async () => {
    const { config, topicMsg, topicSchd, topicOffsets } = setup();
    const extra = randomTopic('msgx-tx');
    const first = await ensureTopics(config, [extra]);
    expect(first.created.sort()).toEqual([topicMsg, topicSchd, topicOffsets, extra].sort());
    const second = await ensureTopics(config, [extra]);
    expect(second.created).toEqual([]);
    expect(second.warnings).toEqual([]);

    const admin = new kafkajs.Kafka({ brokers: kafkaBrokers, logLevel: kafkajs.logLevel.NOTHING }).admin();
    await admin.connect();
    const meta = await admin.fetchTopicMetadata({ topics: [topicSchd] });
    expect(meta.topics[0]!.partitions).toHaveLength(3);
    const cfg = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [topicSchd, topicOffsets].map((name) => ({
        type: kafkajs.ConfigResourceTypes.TOPIC,
        name,
        configNames: ['cleanup.policy'],
      })),
    });
    expect(Object.fromEntries(cfg.resources.map((r) => [r.resourceName, r.configEntries[0]!.configValue]))).toEqual({
      [topicSchd]: 'compact',
      [topicOffsets]: 'compact',
    });
    // The offsets topic rolls its segments every 10 minutes, so compaction keeps what a start reads small.
    const seg = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [
        { type: kafkajs.ConfigResourceTypes.TOPIC, name: topicOffsets, configNames: ['segment.ms', 'min.cleanable.dirty.ratio'] },
      ],
    });
    expect(Object.fromEntries(seg.resources[0]!.configEntries.map((e) => [e.configName, e.configValue]))).toEqual({
      'segment.ms': '600000',
      'min.cleanable.dirty.ratio': '0.1',
    });
    await admin.disconnect();
  });

  test('an offsets topic made elsewhere with week-long segments is reported with the setting that fixes it, and left as it is', async () => {
    const { config, topicOffsets } = setup();
    await createTopics(kafkaBrokers, [
      {
        topic: topicOffsets,
        configEntries: [
          { name: 'cleanup.policy', value: 'compact' },
          { name: 'segment.ms', value: '604800000' }, // Kafka's default: a week
        ],
      },
    ]);
    const r = await ensureTopics(config);
    expect(r.existing).toContain(topicOffsets);
    expect(r.warnings).toHaveLength(1);
    expect(r.warnings[0]).toContain(`${topicOffsets}: segment.ms is 604800000;`);
    expect(r.warnings[0]).toContain(`--add-config segment.ms=600000`);
  });

  test('a schd and an offsets topic made elsewhere without compaction are each reported, and left as they are', async () => {
    const { config, topicSchd, topicOffsets } = setup();
    await createTopics(kafkaBrokers, [
      { topic: topicSchd, configEntries: [{ name: 'cleanup.policy', value: 'delete' }] },
      {
        topic: topicOffsets,
        configEntries: [
          { name: 'cleanup.policy', value: 'delete' },
          { name: 'segment.ms', value: '600000' },
        ],
      },
    ]);
    const r = await ensureTopics(config);
    expect(r.existing).toEqual(expect.arrayContaining([topicSchd, topicOffsets]));
    expect([...r.warnings].sort()).toEqual(
      [`${topicSchd}: cleanup.policy is delete, expected compact`, `${topicOffsets}: cleanup.policy is delete, expected compact`].sort(),
    );
    const admin = new kafkajs.Kafka({ brokers: kafkaBrokers, logLevel: kafkajs.logLevel.NOTHING }).admin();
    await admin.connect();
    const cfg = await admin
      .describeConfigs({
        includeSynonyms: false,
        resources: [topicSchd, topicOffsets].map((name) => ({
          type: kafkajs.ConfigResourceTypes.TOPIC,
          name,
          configNames: ['cleanup.policy'],
        })),
      })
      .finally(() => admin.disconnect());
    expect(cfg.resources.map((c) => c.configEntries[0]!.configValue)).toEqual(['delete', 'delete']);
  });

  test('without brokers it is a no-op (file sink)', async () => {
    const config = loadConfig({});
    expect(await ensureTopics(config)).toMatchObject({ fileSink: true, created: [] });
  });
});

describe('delivery to Kafka', () => {
  test('records carry the headers and keys keep their order', async () => {
    const { config, ctx, topicMsg } = setup({ MSGX_DELIVERY_BATCH_SIZE: '50' });
    await ensureTopics(config);
    const events: NewEvent[] = Array.from({ length: 300 }, (_, i) => ({
      target: 'msg',
      key: `F${i % 7}`,
      type: 'FLIGHT_UPDATED',
      value: { i },
      headers: { 'x-trace': `t${i}` },
    }));
    const ids = await enqueueEvents(pg.db, events);
    const kafka = new KafkaPublisher(config.kafka, { publishTimeoutMs: 2000 });
    try {
      while ((await openCount('msg')) > 0) await dispatchOnce(ctx, [kafka], { targets: ['msg'] });
    } finally {
      await kafka.close();
    }
    // Every record on the topic, to its end: exactly the 300, none twice.
    const got = await readTopicToEnd(kafkaBrokers, topicMsg);
    expect(got).toHaveLength(300);
    expect(new Set(got.map((r) => r.headers['msgx-event-id'])).size).toBe(300);
    assertKeyOrder(got);
    const first = got.find((r) => r.headers['msgx-event-id'] === String(ids[0]))!;
    expect(first).toMatchObject({ key: 'F0', value: '{"i":0}' });
    expect(first.headers).toMatchObject({ 'msgx-event-type': 'FLIGHT_UPDATED', 'x-trace': 't0' });
  });

  test('a publisher that reaches no broker (an unreachable address): events wait with backoff, spending no attempts, then drain in order through one that does', async () => {
    const { config, ctx, topicMsg } = setup();
    await ensureTopics(config);
    const down = new KafkaPublisher({ ...config.kafka, brokers: [`127.0.0.1:${await deadPort()}`] }, { publishTimeoutMs: 2000 });
    const up = new KafkaPublisher(config.kafka, { publishTimeoutMs: 2000 });
    let current: Publisher = down;
    const ids = await enqueueEvents(
      pg.db,
      Array.from({ length: 200 }, (_, i) => ({ target: 'msg', key: `F${i % 5}`, type: 'T', value: { i } })),
    );
    const stop = new AbortController();
    const loop = runWorker(ctx, {
      ...dispatcherRole(ctx, () => [current], { targets: ['msg'], maxBatches: 10 }),
      unlocked: true,
      signal: stop.signal,
    });
    try {
      // An unreachable broker is an outage, not the event's fault: the target shows stalled with the
      // reason, and the head has spent none of its attempts.
      await waitFor(async () => !!(await headOf('msg'))?.stalledSince, { what: 'the target stalled while Kafka is down' });
      expect(await headOf('msg')).toMatchObject({ headEventId: ids[0], headAttempts: 0 });
      expect(await openCount('msg')).toBe(200);

      current = up;
      await waitFor(async () => (await openCount('msg')) === 0, { timeoutMs: 20_000, what: 'drain after recovery' });
    } finally {
      stop.abort();
      await loop;
      await down.close();
      await up.close();
    }
    // Every record on the topic, to the end of every partition: the 200, none twice.
    const got = await readTopicToEnd(kafkaBrokers, topicMsg);
    assertKeyOrder(got);
    expect(got).toHaveLength(200);
    expect(new Set(got.map((r) => r.headers['msgx-event-id'])).size).toBe(200);
  });

  test('two dispatchers at once never deliver a target out of order', async () => {
    /** The least share of the records each of the two must have written for the run to count. */
    const MIN_SHARE = 0.1;
    // One run proves something about two dispatchers only if both delivered; which one wins each
    // claim is up to the scheduler, so a run that one of them took whole is run again (new topics).
    // Rounds of one batch, and a 10 ms rest instead of 1 s, keep both racing for every batch: with
    // long rounds and long rests, one dispatcher could drain the 2,000 events (a fifth of a second
    // on a fast host) while the other slept, three runs in a row.
    for (let run = 1; ; run++) {
      const { config, ctx, topicMsg } = setup({
        MSGX_DELIVERY_BATCH_SIZE: '20',
        MSGX_DELIVERY_POLL_INTERVAL: '10ms',
        MSGX_POLL_INTERVAL_MS: '10',
      });
      const txTopic = randomTopic('msgx-tx');
      await ensureTopics(config, [txTopic]);
      const [idA, idB] = [`A${run}`, `B${run}`];
      const events: NewEvent[] = [];
      for (let i = 0; i < 2000; i++) events.push({ target: i % 2 ? 'msg' : `tx:${txTopic}`, key: `K${i % 11}`, type: 'T', value: { i } });
      const a = new Recorded(new KafkaPublisher(config.kafka, { publishTimeoutMs: 2000, name: 'kafka' }));
      const b = new Recorded(new KafkaPublisher(config.kafka, { publishTimeoutMs: 2000, name: 'kafka' }));
      const stop = new AbortController();
      const loops = [
        runWorker(ctx, {
          ...dispatcherRole(ctx, [a], { dispatcherId: idA, targets: ['msg', `tx:${txTopic}`], maxBatches: 1 }),
          unlocked: true,
          signal: stop.signal,
        }),
        runWorker(ctx, {
          ...dispatcherRole(ctx, [b], { dispatcherId: idB, targets: ['msg', `tx:${txTopic}`], maxBatches: 1 }),
          unlocked: true,
          signal: stop.signal,
        }),
      ];
      try {
        // Enqueue while both run, in several transactions.
        for (let i = 0; i < events.length; i += 250) await enqueueEvents(pg.db, events.slice(i, i + 250));
        await waitFor(async () => (await openCount()) === 0, { timeoutMs: 60_000, what: 'both dispatchers drained' });
      } finally {
        stop.abort();
        await Promise.all(loops);
        await a.close();
        await b.close();
      }
      // Every record on both topics, to the end of every partition.
      const msg = await readTopicToEnd(kafkaBrokers, topicMsg);
      const tx = await readTopicToEnd(kafkaBrokers, txTopic);
      assertKeyOrder(msg);
      assertKeyOrder(tx);
      // Judged against the test's own model too, not msgx's event ids: per key, the topic carries the
      // events' own numbers (value.i) exactly as they were enqueued, each once.
      for (const [target, records] of [
        ['msg', msg],
        [`tx:${txTopic}`, tx],
      ] as const)
        expect(byKey(records.map((r) => ({ key: r.key!, i: (JSON.parse(r.value!) as { i: number }).i }))), `${target} per key`).toEqual(
          byKey(events.filter((e) => e.target === target).map((e) => ({ key: e.key!, i: (e.value as { i: number }).i }))),
        );
      // Nothing was delivered twice: a claim never overlapped another one.
      expect(msg).toHaveLength(1000);
      expect(tx).toHaveLength(1000);
      expect(new Set([...msg, ...tx].map((r) => r.headers['msgx-event-id'])).size).toBe(2000);
      // Who wrote each record on the topics: the dispatcher whose publish Kafka acknowledged at
      // that partition and offset (every record is one dispatcher's, none unaccounted for).
      const sentBy = { [idA]: 0, [idB]: 0 };
      for (const [topic, records] of [
        [topicMsg, msg],
        [txTopic, tx],
      ] as const)
        for (const r of records) {
          const at = `${topic}/${r.partition}:${r.offset}`;
          const who = a.acked.get(at) === r.headers['msgx-event-id'] ? idA : b.acked.get(at) === r.headers['msgx-event-id'] ? idB : null;
          expect(who, `record ${at} acknowledged to neither dispatcher`).not.toBeNull();
          sentBy[who!]!++;
        }
      console.log(`[outbox-kafka] two dispatchers, run ${run}: ${JSON.stringify(sentBy)}`);
      // Both delivered a real share (a 1,999:1 split proves nothing about two dispatchers racing).
      if (Math.min(sentBy[idA]!, sentBy[idB]!) >= MIN_SHARE * 2000) break;
      expect(run, `one dispatcher delivered almost everything in ${run} runs: ${JSON.stringify(sentBy)}`).toBeLessThan(3);
    }
  }, 240_000);

  test('a dispatcher killed mid-batch: its lease expires and another one delivers the batch again, in order', async () => {
    const { config, ctx, topicMsg } = setup({ MSGX_DELIVERY_LEASE: '3s', MSGX_DELIVERY_PUBLISH_TIMEOUT: '1s' });
    await ensureTopics(config);
    const ids = await enqueueEvents(
      pg.db,
      Array.from({ length: 30 }, (_, i) => ({ target: 'msg', key: `F${i % 3}`, type: 'T', value: { i } })),
    );
    // A child process claims and publishes the batch to Kafka, then freezes before it can mark it,
    // and is killed there.
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD_SCRIPT], {
      cwd: process.cwd(),
      env: { ...process.env, CHILD_PG_URL: pg.url, CHILD_BROKERS: kafkaBrokers.join(','), CHILD_TOPIC: topicMsg },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    await waitFor(() => out.includes('published'), { timeoutMs: 30_000, what: `child to publish (${err.slice(-500)})` });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));

    expect(await headOf('msg')).toMatchObject({ delivering: 30, pending: 0 });
    const kafka = new KafkaPublisher(config.kafka, { publishTimeoutMs: 1000 });
    try {
      // Before the lease runs out nobody touches the batch …
      const early = await dispatchOnce(ctx, [kafka], { targets: ['msg'] });
      expect(early.targets[0]!.skipped).toBe('leased');
      // … after it, the batch is delivered again with the same event ids.
      await waitFor(
        async () => {
          await dispatchOnce(ctx, [kafka], { targets: ['msg'] });
          return (await openCount('msg')) === 0;
        },
        { timeoutMs: 15_000, what: 'redelivery after lease expiry' },
      );
    } finally {
      await kafka.close();
    }
    // To the end of every partition: each of the 30 exactly twice (the child's publish and the
    // redelivery), never a third time.
    const got = await readTopicToEnd(kafkaBrokers, topicMsg);
    expect(got).toHaveLength(60);
    assertKeyOrder(got);
    expect(new Set(got.map((r) => r.headers['msgx-event-id']))).toEqual(new Set(ids.map(String)));
  });
});

// Runs in the child: read one batch as dispatcher 'child', publish it for real, then hang in the
// statement that finishes it (the parent kills the process there).
const CHILD_SCRIPT = `
import { PgDb } from './lib/db/pg.ts';
import { loadConfig } from './lib/config/config.ts';
import { dispatchOnce } from './lib/outbox/dispatcher.ts';
import { KafkaPublisher } from './lib/outbox/publishers/kafka.ts';
import { silentLog } from './lib/observability/logger.ts';
import { systemClock } from './lib/shared/clock.ts';
const db = new PgDb(process.env.CHILD_PG_URL);
const config = loadConfig({ MSGX_KAFKA_BROKERS: process.env.CHILD_BROKERS, MSGX_TOPIC_MSG: process.env.CHILD_TOPIC,
  MSGX_DELIVERY_LEASE: '3s', MSGX_DELIVERY_PUBLISH_TIMEOUT: '1s' });
const kafka = new KafkaPublisher(config.kafka, { publishTimeoutMs: 1000 });
const frozen = { kind: 'pg', tx: db.tx.bind(db), listen: db.listen.bind(db), session: db.session.bind(db), close: async () => {},
  query: (sql, params) => /snap_lo = CASE/.test(sql) ? (console.log('published'), new Promise(() => {})) : db.query(sql, params) };
await dispatchOnce({ db: frozen, config, clock: systemClock, log: silentLog }, [kafka], { dispatcherId: 'child', targets: ['msg'] });
`;

describe('the 20,000-event run with the publisher cut off from the broker in the middle (an unreachable address)', () => {
  test('every event reaches Kafka, per-FLID order holds, schd ends with the latest state, nothing DEAD', async () => {
    const { config, ctx, topicMsg, topicSchd } = setup({ MSGX_DELIVERY_MAX_RETRY_COUNT: '10', MSGX_DELIVERY_MAX_BACKOFF: '500ms' });
    await ensureTopics(config);
    const down = new KafkaPublisher({ ...config.kafka, brokers: [`127.0.0.1:${await deadPort()}`] }, { publishTimeoutMs: 2000 });
    const up = new KafkaPublisher(config.kafka, { publishTimeoutMs: 2000 });
    let current: Publisher = up;
    const flights = 200;
    const versions = 50; // 200 × 50 changes = 10,000 msg events + 10,000 schd events
    const stop = new AbortController();
    const loop = runWorker(ctx, { ...dispatcherRole(ctx, () => [current], { maxBatches: 10 }), unlocked: true, signal: stop.signal });
    let msgIds: number[] = [];
    try {
      for (let v = 1; v <= versions; v++) {
        const batch: NewEvent[] = [];
        for (let f = 0; f < flights; f++) {
          const flid = `FL${f}`;
          batch.push({ target: 'msg', key: flid, flid, stateVersion: v, type: 'FLIGHT_UPDATED', value: { flid, v } });
          batch.push({ target: 'schd', key: flid, flid, stateVersion: v, type: 'UPSERT', value: { FLID: flid, stateVersion: v } });
        }
        msgIds = msgIds.concat(await enqueueEvents(pg.db, batch));
        if (v === 15) current = down; // the broker "goes away" …
        if (v === 30) {
          // … for as long as it takes to fail a few attempts, then comes back.
          await waitFor(
            async () => {
              const heads = await pendingByTarget(pg.db, new Date());
              return heads.some((t) => t.stalledSince && Date.now() - t.stalledSince.getTime() >= 2_000);
            },
            // A liveness bound: two failed attempts take ~5 s; a loaded host (the whole suite on 2
            // slowed cores) once needed more than 20 s.
            { timeoutMs: 60_000, what: 'failures during the outage' },
          );
          current = up;
        }
      }
      await waitFor(async () => (await openCount()) === 0, { timeoutMs: 120_000, what: 'everything delivered' });
    } finally {
      stop.abort();
      await loop;
      await down.close();
      await up.close();
    }
    expect(await deadEvents(pg.db)).toEqual([]);

    const msg = await readTopicToEnd(kafkaBrokers, topicMsg, { timeoutMs: 60_000 });
    assertKeyOrder(msg);
    const delivered = new Set(msg.map((r) => r.headers['msgx-event-id']));
    expect(delivered.size).toBe(flights * versions);
    // Per FLID the versions arrive 1, 2, 3 … in order.
    const lastV = new Map<string, number>();
    const seen = new Set<string>();
    for (const r of msg) {
      if (seen.has(r.headers['msgx-event-id']!)) continue;
      seen.add(r.headers['msgx-event-id']!);
      const { v } = JSON.parse(r.value!) as { v: number };
      expect(v).toBe((lastV.get(r.key!) ?? 0) + 1);
      lastV.set(r.key!, v);
    }

    // schd: the last record per FLID (what compaction keeps) is the latest whole state.
    const schd = await readTopicToEnd(kafkaBrokers, topicSchd, { timeoutMs: 60_000 });
    const latest = new Map<string, number>();
    for (const r of schd) latest.set(r.key!, (JSON.parse(r.value!) as { stateVersion: number }).stateVersion);
    expect(latest.size).toBe(flights);
    for (const v of latest.values()) expect(v).toBe(versions);
    // Aggregation sent far fewer records than versions.
    expect(schd.length).toBeLessThan(flights * versions);
  }, 240_000);
});

describe('webhooks', () => {
  test('signed JSON posts; a webhook answering 503 holds the event, which is sent once it answers 2xx', async () => {
    const { config, ctx } = setup({ MSGX_SIGNING_SECRET: 's3cret' });
    const received: { body: string; sig: string; id: string }[] = [];
    let healthy = false;
    const srv = createHttpServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        if (!healthy) {
          res.writeHead(503).end();
          return;
        }
        received.push({ body, sig: String(req.headers['msgx-signature']), id: String(req.headers['msgx-event-id']) });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}/hook`;
    const hook = new WebhookPublisher({ url, signingSecret: config.signingSecret, timeoutMs: 1000 });
    try {
      const ids = await enqueueEvents(pg.db, [
        { target: 'tx:hooks', key: 'k', type: 'T1', value: { a: 1 } },
        { target: 'tx:hooks', key: 'k', type: 'T2', value: null },
      ]);
      await dispatchOnce(ctx, [hook], { targets: ['tx:hooks'] });
      const head = await headOf('tx:hooks');
      expect(head).toMatchObject({ headEventId: ids[0], headAttempts: 1 }); // any non-2xx answer spends an attempt (docs/outbox.md)
      expect(head!.headLastError).toMatch(/HTTP 503/);

      healthy = true;
      await waitFor(
        async () => {
          await dispatchOnce(ctx, [hook], { targets: ['tx:hooks'] });
          return (await openCount('tx:hooks')) === 0;
        },
        { what: 'webhook delivery' },
      );
      expect(received.map((x) => x.id)).toEqual(ids.map(String));
      for (const x of received) expect(verifySignature('s3cret', x.body, x.sig)).toMatchObject({ ok: true });
      expect(JSON.parse(received[0]!.body)).toEqual({
        eventId: ids[0],
        type: 'T1',
        key: 'k',
        value: '{"a":1}',
        headers: { 'msgx-event-id': String(ids[0]), 'msgx-event-type': 'T1' },
      });
      expect(JSON.parse(received[1]!.body).value).toBeNull();
    } finally {
      srv.close();
    }
  });

  test('a webhook that never answers is cut at the publish deadline', async () => {
    const { ctx } = setup({ MSGX_DELIVERY_PUBLISH_TIMEOUT: '300ms', MSGX_DELIVERY_LEASE: '5s' });
    const srv = createHttpServer(() => {
      /* never answers */
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}/hook`;
    // Its own timeout is far beyond any test's: only the 300 ms publish deadline can end the wait,
    // so the dispatch returning at all (before the test's bound) is the cut.
    const hook = new WebhookPublisher({ url, timeoutMs: 3_600_000 });
    try {
      const [id] = await enqueueEvents(pg.db, [{ target: 'tx:slow', type: 'T', value: 'x' }]);
      await dispatchOnce(ctx, [hook], { targets: ['tx:slow'] });
      const head = await headOf('tx:slow');
      expect(head).toMatchObject({ headEventId: id, headAttempts: 0 }); // no answer in time: an outage, no attempt spent
      expect(head!.headLastError).toMatch(/timeout/);
    } finally {
      srv.closeAllConnections();
      srv.close();
    }
  });
});

/** A publisher that remembers where Kafka acknowledged each event it published (topic/partition:offset → event id). */
class Recorded implements Publisher {
  readonly acked = new Map<string, string>();
  readonly name: string;
  constructor(private readonly inner: Publisher) {
    this.name = inner.name;
  }
  async publish(records: OutRecord[], signal: AbortSignal): Promise<PublishResult[]> {
    const results = await this.inner.publish(records, signal);
    results.forEach((r, i) => {
      if (r.ok) this.acked.set(`${records[i]!.topic}/${r.partition}:${r.offset}`, String(records[i]!.eventId));
    });
    return results;
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
