import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import type { HttpRequest } from '../../lib/http/types.ts';
import { registerFlightProcessors } from '../../lib/flights/processors.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import type { MessageTrace } from '../../lib/observability/trace.ts';
import type { Throughput } from '../../lib/observability/throughput.ts';
import { dispatchOnce } from '../../lib/outbox/dispatcher.ts';
import { ExactlyOnceSinks } from '../../lib/outbox/exactlyOnce.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import type { OutRecord, Publisher, PublishResult } from '../../lib/outbox/types.ts';
import { ProcessorRegistry } from '../../lib/pipeline/processor.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { drainPoller, drainPump, makeContext, wire } from '../helpers/pipeline.ts';
import { createTopics, randomTopic, readTopicToEnd, type ReadRecord } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, type TestPg } from '../helpers/services.ts';
import { SESSION_COOKIE, sessionValue } from '../../lib/http/consoleSession.ts';

/** A webhook that fails its first call, so one event shows a failed outcome then a retried ok. */
class FlakyWebhook implements Publisher {
  readonly name = 'webhook:https://hooks.example/x';
  calls = 0;
  async publish(records: OutRecord[]): Promise<PublishResult[]> {
    this.calls++;
    return records.map(() => (this.calls === 1 ? { ok: false, error: 'HTTP 503' } : { ok: true }));
  }
  async close() {}
}

const flight = (flid: string, extra = '') =>
  `<FLIGHT><FLID>${flid}</FLID><OPDY>20261129</OPDY><AWCD>CZ</AWCD><FLNO>${flid}</FLNO><SOBT>20261129101500</SOBT><STAT>SCH</STAT>${extra}</FLIGHT>`;

describe('trace of an inbound message, throughput, console routes', () => {
  let pg: TestPg;
  let ctx: AppContext;
  const clock = new FakeClock('2026-11-29T08:00:00Z');
  const router = buildRouter();
  const ids: Record<string, number> = {};
  const webhook = new FlakyWebhook();
  // Real topics: msgx.msg through the plain producer, msgx.schd through the transactional one.
  const brokers = serviceUrls().kafkaBrokers;
  const topicMsg = randomTopic('msgx-trace-msg');
  const topicSchd = randomTopic('msgx-trace-schd');
  let kafka: KafkaPublisher;
  let sinks: ExactlyOnceSinks;
  /** The oracle: every record a consumer of our own reads from the topics, by its msgx-event-id. */
  const consumed = new Map<string, ReadRecord[]>();

  const get = async (path: string, o: { admin?: boolean; headers?: Record<string, string> } = {}) => {
    const url = new URL(path, 'http://x');
    const req: HttpRequest = {
      method: 'GET',
      path: url.pathname,
      headers: o.headers ?? {},
      query: Object.fromEntries(url.searchParams),
      body: '',
      params: {},
      isAdmin: o.admin ?? true,
    };
    return router.handle(req, ctx);
  };
  const trace = async (id: number) => (await get(`/admin/trace/${id}`)).body as MessageTrace;
  const deliverAll = async () => {
    for (let i = 0; i < 5; i++) {
      await dispatchOnce(ctx, [kafka, webhook], { targets: ['msg'] });
      await dispatchOnce(ctx, [], { targets: ['schd'], exactlyOnce: sinks });
      clock.advance(60_000);
    }
  };
  /** What a real consumer read of one event: [partition, offset] per record that carried its id. */
  const readOf = (eventId: number) => (consumed.get(String(eventId)) ?? []).map((r) => [r.partition, String(r.offset)]);
  /** What the trace says Kafka took of one event: [partition, offset] per 'published' entry. */
  const publishedOf = (t: MessageTrace, eventId: number) =>
    t.timeline
      .filter((e) => e.kind === 'published' && e.detail.eventId === eventId && e.detail.publisher === 'kafka')
      .map((e) => [e.detail.partition, e.detail.offset]);

  beforeAll(async () => {
    await createTopics(brokers, [
      { topic: topicMsg, numPartitions: 6 },
      { topic: topicSchd, numPartitions: 3 },
      { topic: `${topicSchd}.offsets`, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] },
    ]);
    pg = await freshPg();
    const mailbox = new PgMailbox(pg.db);
    await mailbox.ensureTables();
    ctx = makeContext({
      db: pg.db,
      mailbox,
      clock,
      registry: registerFlightProcessors(new ProcessorRegistry()),
      env: {
        MSGX_MAX_ATTEMPTS: '1',
        MSGX_DELIVERY_INITIAL_BACKOFF: '1s',
        MSGX_KAFKA_BROKERS: brokers.join(','),
        MSGX_TOPIC_MSG: topicMsg,
        MSGX_TOPIC_SCHD: topicSchd,
        MSGX_TOPIC_OFFSETS: `${topicSchd}.offsets`,
        MSGX_STAGE: 'trace-test',
      },
    });
    kafka = new KafkaPublisher(ctx.config.kafka, { publishTimeoutMs: 10_000 });
    sinks = new ExactlyOnceSinks(ctx.config);
    ids.plan = await mailbox.insertInbound(
      wire({ TYPE: 'SCHD', STYP: 'DNLD', SEQN: 1 }, `<SCHD><OPDY>20261129</OPDY><CNT>2</CNT>${flight('1001')}${flight('1002')}</SCHD>`),
    );
    ids.gate = await mailbox.insertInbound(
      wire(
        { TYPE: 'FLOP', STYP: 'GATE', SEQN: 2, DTTM: '20261129090000' },
        '<FLOP><FLIGHT><FLID>1001</FLID><GATE><ITEM><CODE>B14</CODE><BEG>20261129093000</BEG><END>20261129101500</END></ITEM></GATE></FLIGHT></FLOP>',
      ),
    );
    ids.unsupported = await mailbox.insertInbound(
      wire({ TYPE: 'FLOP', STYP: 'WXYZ', SEQN: 3 }, '<FLOP><FLIGHT><FLID>1001</FLID></FLIGHT></FLOP>'),
    );
    ids.unknownFlight = await mailbox.insertInbound(
      wire({ TYPE: 'FLOP', STYP: 'ETOT', SEQN: 4 }, '<FLOP><FLIGHT><FLID>9999</FLID><ETOT>20261129100000</ETOT></FLIGHT></FLOP>'),
    );
    await drainPoller(ctx);
    clock.advance(1500); // every message waited 1.5 s in proc_state before the pump took it
    await drainPump(ctx);
    // The backfill of these ran right after commit; one more message is left with its backfill pending.
    await deliverAll();
    for (const topic of [topicMsg, topicSchd])
      for (const r of await readTopicToEnd(brokers, topic)) {
        const id = r.headers['msgx-event-id']!;
        consumed.set(id, [...(consumed.get(id) ?? []), r]);
      }
  }, 120_000);
  afterAll(async () => {
    await kafka?.close();
    await sinks?.close();
    await pg?.drop();
  });

  it('a flight change: attempts, versions, its delivered events, backfill, timeline', async () => {
    const t = await trace(ids.gate!);
    expect(t.message).toMatchObject({
      msgId: ids.gate,
      status: 'SUCCEEDED',
      identity: 'FIMS|FLOP|GATE|2',
      type: 'FLOP',
      subtype: 'GATE',
      attempts: 1,
      latencyMs: 1500,
    });
    expect(t.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: 'SUCCEEDED', errorClass: null })]);
    expect(t.flightChanges).toEqual([
      expect.objectContaining({ flid: '1001', opdy: '20261129', change: 'updated', fromVersion: 1, toVersion: 2, fields: ['GATE'] }),
    ]);
    const msg = t.events.find((e) => e.target === 'msg')!;
    expect(msg).toMatchObject({ type: 'FLIGHT_UPDATED', key: '1001', stateVersion: 2, status: 'SENT' });
    // Where the trace says Kafka put it is where a consumer found it: every record with its id, and
    // only those (the webhook's failure sent this one to Kafka twice, at least once).
    expect(readOf(msg.eventId).length).toBeGreaterThan(0);
    expect(publishedOf(t, msg.eventId)).toEqual(readOf(msg.eventId));
    expect(msg.deliveries.filter((d) => d.publisher === 'kafka').map((d) => [d.partition, d.offset])).toEqual(readOf(msg.eventId));
    expect(msg.deliveries.every((d) => d.outcome === 'ok')).toBe(true);
    expect(msg.deliveries.map((d) => d.publisher)).toContain(webhook.name);
    const schd = t.events.find((e) => e.target === 'schd')!;
    expect(schd).toMatchObject({ type: 'UPSERT', stateVersion: 2, status: 'SENT' });
    // msgx.schd went through the transactional producer, exactly once: one record.
    expect(readOf(schd.eventId)).toHaveLength(1);
    expect(publishedOf(t, schd.eventId)).toEqual(readOf(schd.eventId));
    // Sent once its last publisher took it, and not before any of them did.
    for (const e of [msg, schd]) {
      const sent = t.timeline.find((x) => x.kind === 'sent' && x.detail.eventId === e.eventId)!;
      expect(sent, `sent entry of ${e.eventId}`).toBeTruthy();
      expect(sent.at).toBe(
        e.deliveries
          .map((d) => d.at)
          .sort()
          .at(-1),
      );
    }
    expect(t.mailbox).toMatchObject({ id: ids.gate, present: true, processed: true });
    expect(t.mailbox.rawText).toContain('<STYP>GATE</STYP>');
    expect(t.backfill).toMatchObject({ state: 'done', procStatus: 'SUCCEEDED' });
    const kinds = t.timeline.map((e) => e.kind);
    // (received_at is the mailbox's own DATE_RECEIVED, on the database's clock, not the fake one)
    expect(kinds).toContain('received');
    expect(kinds.filter((k) => k !== 'received').slice(0, 3)).toEqual(['enqueued', 'attempt', 'flight-change']);
    expect(kinds).toContain('event');
    expect(kinds).toContain('published');
    expect(kinds).toContain('sent');
    expect(kinds).toContain('backfill');
    expect(t.timeline.map((e) => e.seq)).toEqual(t.timeline.map((_, i) => i + 1));
    for (let i = 1; i < t.timeline.length; i++)
      expect(Date.parse(t.timeline[i]!.at)).toBeGreaterThanOrEqual(Date.parse(t.timeline[i - 1]!.at));
  });

  it('an event a publisher refused at first is SENT once its retry went through, and the plan shows its snapshot', async () => {
    const t = await trace(ids.plan!);
    expect(t.flightChanges.map((c) => [c.flid, c.change, c.fromVersion, c.toVersion])).toEqual([
      ['1001', 'created', null, 1],
      ['1002', 'created', null, 1],
    ]);
    expect(t.snapshot).toEqual([expect.objectContaining({ styp: 'DNLD', scope: '20261129', flights: 2, created: 2 })]);
    // The webhook failed its first call (the plan's events went first): the event was retried; once
    // it went through, nothing of the failure is left on it.
    const first = t.events.find((e) => e.target === 'msg')!;
    expect(webhook.calls).toBeGreaterThan(1);
    expect(first).toMatchObject({ status: 'SENT', lastError: null });
    // The webhook took it on its second try; Kafka on the first, and was not asked again.
    expect(first.deliveries.find((d) => d.publisher === webhook.name)).toMatchObject({ outcome: 'ok', tries: 2 });
    expect(first.deliveries.filter((d) => d.publisher === 'kafka')).toEqual([expect.objectContaining({ outcome: 'ok', tries: 1 })]);
    expect(publishedOf(t, first.eventId)).toEqual(readOf(first.eventId));
    const retried = t.timeline.find(
      (e) => e.kind === 'published' && e.detail.eventId === first.eventId && e.detail.publisher === webhook.name,
    );
    expect(retried?.detail).toMatchObject({ tries: 2 });
    for (const e of t.events.filter((x) => x.target === 'schd')) expect(publishedOf(t, e.eventId)).toEqual(readOf(e.eventId));
  });

  it("an older state version is SENT as the newest of its flight: the plan's state of 1001 went out as the gate change's", async () => {
    const plan = await trace(ids.plan!);
    const gate = await trace(ids.gate!);
    const older = plan.events.find((e) => e.target === 'schd' && e.key === '1001')!;
    const newer = gate.events.find((e) => e.target === 'schd' && e.key === '1001')!;
    // Both were written before the flush, so a consumer read only the newer one.
    expect(readOf(older.eventId)).toEqual([]);
    expect(readOf(newer.eventId)).toHaveLength(1);
    expect(older).toMatchObject({ status: 'SENT', stateVersion: 1, sentAs: newer.eventId, deliveries: [] });
    const sent = plan.timeline.find((x) => x.kind === 'sent' && x.detail.eventId === older.eventId);
    expect(sent?.detail).toMatchObject({ asEventId: newer.eventId });
    expect(sent?.at).toBe(newer.deliveries.map((d) => d.at).sort()[0]);
    // The flight 1002 had one version: it went as itself.
    const single = plan.events.find((e) => e.target === 'schd' && e.key === '1002')!;
    expect(single.sentAs).toBeNull();
    expect(readOf(single.eventId)).toHaveLength(1);
  });

  it('a dead message: its error class per attempt, no flight change, no event; a replay shows as a second attempt', async () => {
    let t = await trace(ids.unsupported!);
    expect(t.message).toMatchObject({ status: 'DEAD', errorClass: 'EXHAUSTED' });
    expect(t.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: 'DEAD', errorClass: 'EXHAUSTED' })]);
    expect(t.attempts[0]!.errorDetail).toMatch(/^UNSUPPORTED: FLOP subtype "WXYZ" is not supported/);
    expect(t.flightChanges).toEqual([]);
    expect(t.events).toEqual([]);
    expect(t.backfill).toMatchObject({ state: 'done', procStatus: 'DEAD' });
    expect(t.backfill.procNote).toMatch(/^EXHAUSTED: UNSUPPORTED/);

    const replay = await router.handle(
      {
        method: 'POST',
        path: '/admin/replay',
        headers: { 'content-type': 'application/json', 'x-msgx-actor': 'console' },
        query: {},
        params: {},
        isAdmin: true,
        body: JSON.stringify({ kind: 'proc', ids: [ids.unsupported] }),
      },
      ctx,
    );
    expect(replay.status).toBe(200);
    clock.advance(1000);
    t = await trace(ids.unsupported!);
    expect(t.message.status).toBe('PENDING');
    expect(t.backfill.state).toBe('open');
    expect(t.replays).toEqual([expect.objectContaining({ actor: 'console', action: 'replay.proc' })]);
    await drainPump(ctx);
    t = await trace(ids.unsupported!);
    expect(t.attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'DEAD'],
      [1, 'DEAD'],
    ]);
    expect(t.timeline.filter((e) => ['attempt', 'replay'].includes(e.kind)).map((e) => e.kind)).toEqual(['attempt', 'replay', 'attempt']);
  });

  it('a skipped message carries its reason; a pending backfill shows its retries', async () => {
    let t = await trace(ids.unknownFlight!);
    expect(t.message).toMatchObject({ status: 'SKIPPED', note: 'no-such-flight' });
    expect(t.backfill.state).toBe('done');
    await pg.db.query(
      `INSERT INTO backfill_todo (msg_id, proc_status, proc_note, processed_at, attempts, next_attempt_at, last_error)
       VALUES ($1, 'SKIPPED', 'no-such-flight', $2, 2, $2, 'mailbox unreachable')`,
      [ids.unknownFlight, clock.now()],
    );
    t = await trace(ids.unknownFlight!);
    expect(t.backfill).toMatchObject({ state: 'pending', attempts: 2, lastError: 'mailbox unreachable', procNote: 'no-such-flight' });
    expect(t.timeline.at(-1)?.kind === 'backfill-pending' || t.timeline.some((e) => e.kind === 'backfill-pending')).toBe(true);
    await pg.db.query(`DELETE FROM backfill_todo WHERE msg_id = $1`, [ids.unknownFlight]);
  });

  it('answers 404 for an unknown message, 400 for a bad ID, 403 to a caller who is not an operator', async () => {
    expect((await get('/admin/trace/987654')).status).toBe(404);
    expect((await get('/admin/trace/abc')).status).toBe(400);
    expect((await get(`/admin/trace/${ids.gate}`, { admin: false })).status).toBe(403);
    expect((await get('/admin/throughput', { admin: false })).status).toBe(403);
  });

  it('throughput: one bucket a minute over the window, counts and latency from proc_state', async () => {
    const r = await get('/admin/throughput?minutes=30');
    expect(r.status).toBe(200);
    const tp = r.body as Throughput;
    expect(tp.buckets).toHaveLength(30);
    const busy = tp.buckets.filter((b) => b.processed > 0);
    expect(tp.totals.processed).toBe(busy.reduce((a, b) => a + b.processed, 0));
    expect(tp.totals.processed).toBeGreaterThanOrEqual(4);
    expect(tp.totals.dead).toBeGreaterThanOrEqual(1);
    expect(busy.find((b) => b.latencyMaxMs === 1500)).toBeTruthy();
    expect((await get('/admin/throughput?minutes=0')).status).toBe(400);
  });

  it('events by source: the deliveries of any producer, with the publishers', async () => {
    const r = await get(`/admin/events?sourceKind=proc&sourceId=${ids.gate}`);
    expect(r.status).toBe(200);
    const items = (r.body as { items: { target: string; deliveries: unknown[] }[] }).items;
    expect(items.map((i) => i.target)).toEqual(['msg', 'schd']);
    expect((await get('/admin/events?sourceKind=nope&sourceId=1')).status).toBe(400);
  });

  it('serves the console files to operators only, with a sign-in page when a token is set', async () => {
    const page = await get('/console');
    expect(page.status).toBe(200);
    expect(page.headers?.['content-type']).toMatch(/^text\/html/);
    expect(String(page.body)).toContain('/console/app.js');
    expect((await get('/console/app.js')).headers?.['content-type']).toMatch(/javascript/);
    expect((await get('/console/style.css')).headers?.['content-type']).toMatch(/^text\/css/);
    // Traversal probes sent over real HTTP with the path exactly as written (no URL
    // normalisation on the way), so they reach the console route as an attacker sends them.
    const server = await startHttpServer(ctx, router, { port: 0 });
    try {
      const port = (server.address() as AddressInfo).port;
      for (const probe of [
        '/console/../package.json',
        '/console/%2e%2e/package.json',
        '/console/..%2fpackage.json',
        '/console/%2e%2e%2f%2e%2e%2fpackage.json',
        '/console/....//package.json',
      ]) {
        const res = await rawGet(port, probe);
        expect([400, 403, 404], `${probe} → ${res.status}`).toContain(res.status);
        expect(res.body, probe).not.toContain('devDependencies');
      }
      // The same server does serve the console's own files.
      expect((await rawGet(port, '/console/style.css')).status).toBe(200);
    } finally {
      server.close();
    }
    expect((await get('/console/login.html')).status).toBe(404);
    expect((await get('/console', { admin: false })).status).toBe(403);

    const withToken = { ...ctx, config: { ...ctx.config, http: { ...ctx.config.http, adminToken: 's3cret' } } };
    const anon = (path: string, headers: Record<string, string> = {}) =>
      router.handle({ method: 'GET', path, headers, query: {}, body: '', params: {}, isAdmin: false }, withToken);
    const login = await anon('/console');
    expect(login.status).toBe(401);
    expect(String(login.body)).toContain('admin token');
    expect((await anon('/console/app.js')).status).toBe(403);
    // The sign-in cookie holds a value derived from the token (lib/http/consoleSession.ts), never the token.
    expect((await anon('/console', { cookie: `a=b; ${SESSION_COOKIE}=${sessionValue('wrong')}` })).status).toBe(401);
    expect((await anon('/console', { cookie: `a=b; ${SESSION_COOKIE}=s3cret` })).status).toBe(401);
    expect((await anon('/console', { cookie: `a=b; ${SESSION_COOKIE}=${sessionValue('s3cret')}` })).status).toBe(200);
    expect((await anon('/console/app.js', { cookie: `${SESSION_COOKIE}=${sessionValue('s3cret')}` })).status).toBe(200);
  });
});

/** GET with the request line's path exactly as given (node's http.request does not normalise it). */
function rawGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
