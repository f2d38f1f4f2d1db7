import { createRequire } from 'node:module';
import kafkajs from 'kafkajs';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { migrate } from '../../lib/db/migrate.ts';
import { PgliteDb } from '../../lib/db/pglite.ts';
import { classifyFetchError, classifyKafkaError, type FailureKind } from '../../lib/outbox/classify.ts';
import { dispatchOnce, type DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { pendingByTarget } from '../../lib/outbox/queries.ts';
import type { OutRecord, Publisher, PublishResult } from '../../lib/outbox/types.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { memoryLog } from '../helpers/kafka.ts';

// The table of docs/outbox.md "Which failures spend an attempt", on the errors kafkajs and fetch
// really throw (built with kafkajs' own classes and codes), then through a delivery round on
// PGlite with a fake clock.

const require = createRequire(import.meta.url);
const { createErrorFromCode } = require('kafkajs/src/protocol/error.js') as { createErrorFromCode: (code: number) => Error };
const {
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSNonRetriableError,
  KafkaJSConnectionError,
  KafkaJSRequestTimeoutError,
  KafkaJSBrokerNotFound,
} = kafkajs as unknown as Record<string, new (e: unknown, o?: unknown) => Error>;

const code = {
  UNKNOWN_TOPIC_OR_PARTITION: 3,
  LEADER_NOT_AVAILABLE: 5,
  REQUEST_TIMED_OUT: 7,
  MESSAGE_TOO_LARGE: 10,
  RECORD_LIST_TOO_LARGE: 18,
  TOPIC_AUTHORIZATION_FAILED: 29,
};
// How kafkajs' retrier wraps what the broker said (src/retry/index.js).
const retried = (e: Error) => new KafkaJSNumberOfRetriesExceeded!(e, { retryCount: 5, retryTime: 1000 });
const bailed = (e: Error) => new KafkaJSNonRetriableError!(e, { cause: e });
const sysErr = (c: string) => Object.assign(new Error(`connect ${c} 127.0.0.1:1`), { code: c });

describe('Kafka errors → effect', () => {
  const table: [string, Error, FailureKind, RegExp][] = [
    [
      'unknown topic, after kafkajs retried the metadata miss',
      retried(createErrorFromCode(code.UNKNOWN_TOPIC_OR_PARTITION)),
      'event',
      /UNKNOWN_TOPIC_OR_PARTITION/,
    ],
    ['record too large', bailed(createErrorFromCode(code.MESSAGE_TOO_LARGE)), 'event', /MESSAGE_TOO_LARGE/],
    ['batch too large', bailed(createErrorFromCode(code.RECORD_LIST_TOO_LARGE)), 'event', /RECORD_LIST_TOO_LARGE/],
    ['topic authorisation denied', bailed(createErrorFromCode(code.TOPIC_AUTHORIZATION_FAILED)), 'event', /TOPIC_AUTHORIZATION_FAILED/],
    ['invalid topic (client-side refusal)', new KafkaJSNonRetriableError!('Invalid topic'), 'event', /Invalid topic/],
    [
      'connection refused, retries spent',
      retried(
        new KafkaJSConnectionError!('Connection error: connect ECONNREFUSED 127.0.0.1:1', { broker: '127.0.0.1:1', code: 'ECONNREFUSED' }),
      ),
      'outage',
      /ECONNREFUSED/,
    ],
    ['DNS failure', retried(new KafkaJSConnectionError!('getaddrinfo ENOTFOUND nowhere', { code: 'ENOTFOUND' })), 'outage', /ENOTFOUND/],
    ['no broker in the metadata', new KafkaJSBrokerNotFound!('No brokers in the broker pool'), 'outage', /No brokers/],
    [
      'no leader (election in progress), retries spent',
      retried(createErrorFromCode(code.LEADER_NOT_AVAILABLE)),
      'outage',
      /LEADER_NOT_AVAILABLE/,
    ],
    [
      'a request timed out on the client',
      retried(new KafkaJSRequestTimeoutError!('Request Produce(key: 0, version: 7) timed out')),
      'timeout',
      /timed out/,
    ],
    ['the broker says the request timed out', retried(createErrorFromCode(code.REQUEST_TIMED_OUT)), 'timeout', /REQUEST_TIMED_OUT/],
    ['a plain socket error', sysErr('ECONNREFUSED'), 'outage', /ECONNREFUSED/],
  ];
  test.each(table)('%s', (_what, err, kind, text) => {
    const c = classifyKafkaError(err);
    expect(c.kind).toBe(kind);
    expect(c.error).toMatch(text);
  });
});

describe('webhook (fetch) errors → effect', () => {
  const table: [string, unknown, FailureKind][] = [
    ['connection refused', new TypeError('fetch failed', { cause: sysErr('ECONNREFUSED') }), 'outage'],
    ['unknown host', new TypeError('fetch failed', { cause: sysErr('ENOTFOUND') }), 'outage'],
    ['its own timeout', new DOMException('The operation was aborted due to timeout', 'TimeoutError'), 'timeout'],
    ['the publish deadline', new DOMException('This operation was aborted', 'AbortError'), 'timeout'],
    [
      'the socket closed mid-answer',
      new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) }),
      'timeout',
    ],
  ];
  test.each(table)('%s', (_what, err, kind) => expect(classifyFetchError(err)).toBe(kind));
});

// ---- through a round: who pays for a timeout, and the stalled mark ----------------------------

let db: PgliteDb;
beforeAll(async () => {
  db = await PgliteDb.open();
  await migrate(db);
}, 60_000);
afterAll(async () => db?.close());
beforeEach(async () => {
  await db.query(`TRUNCATE msg_event, event_delivery, outbox_target, outbox_exception RESTART IDENTITY CASCADE`);
});

/** Answers each record by what `answer` says; its probe succeeds when `reachable`. */
class ScriptedPublisher implements Publisher {
  readonly name = 'kafka';
  reachable = true;
  probes = 0;
  constructor(public answer: (r: OutRecord) => PublishResult) {}
  async publish(records: OutRecord[]): Promise<PublishResult[]> {
    return records.map((r) => this.answer(r));
  }
  async probe(): Promise<void> {
    this.probes++;
    if (!this.reachable) throw new Error('connect ECONNREFUSED');
  }
  async close(): Promise<void> {}
}

function setup() {
  const clock = new FakeClock('2026-11-29T00:00:00Z');
  const config = loadConfig({
    MSGX_DELIVERY_MAX_RETRY_COUNT: '2',
    MSGX_DELIVERY_INITIAL_BACKOFF: '5s',
    MSGX_DELIVERY_MAX_BACKOFF: '1m',
  });
  const ctx: DispatchContext = { db, config, clock, log: memoryLog() };
  return { clock, ctx };
}

/** Each event's state, attempts and last error as every reader derives them (msgx_event_state, its exception). */
async function rowsOf(ids: number[]) {
  const r = await db.query<{ event_id: number; status: string; attempts: number; last_error: string | null }>(
    `SELECT e.event_id, msgx_event_state(e.status, e.target, e.event_id, e.writer_xid, now()) AS status,
            coalesce(x.attempts, 0) AS attempts, coalesce(x.last_error, e.last_error) AS last_error
     FROM msg_event e LEFT JOIN outbox_exception x ON x.target = e.target AND x.event_id = e.event_id
     WHERE e.event_id = ANY($1) ORDER BY e.event_id`,
    [ids],
  );
  return r.rows;
}

describe('a round applies the table', () => {
  test('a timeout while the destination answers its probe spends attempts: DEAD after the budget, the next event delivered', async () => {
    const { clock, ctx } = setup();
    const ids = await enqueueEvents(
      db,
      [1, 2, 3].map((n) => ({ target: 'tx:t', key: 'k', type: 'T', value: { n } })),
      { now: clock.now() },
    );
    const pub = new ScriptedPublisher((r) =>
      r.eventId === ids[0] ? { ok: false, error: 'publish timeout after 3000ms', timedOut: true } : { ok: true },
    );
    await dispatchOnce(ctx, [pub]);
    expect(pub.probes).toBe(1);
    expect((await rowsOf(ids)).map((r) => [r.status, r.attempts])).toEqual([
      ['PENDING', 1],
      ['PENDING', 0],
      ['PENDING', 0],
    ]);
    expect((await rowsOf(ids))[0]!.last_error).toMatch(/publish timeout after 3000ms \(the destination answers otherwise/);
    clock.advance(5_000);
    await dispatchOnce(ctx, [pub]);
    expect((await rowsOf([ids[0]!]))[0]).toMatchObject({ status: 'DEAD', attempts: 2 });
    await dispatchOnce(ctx, [pub]);
    expect((await rowsOf(ids)).map((r) => r.status)).toEqual(['DEAD', 'SENT', 'SENT']);
  });

  test('a timeout while the destination does not answer is an outage: no attempt, the target stalled until it is back', async () => {
    const { clock, ctx } = setup();
    const ids = await enqueueEvents(
      db,
      [1, 2].map((n) => ({ target: 'tx:t', key: 'k', type: 'T', value: { n } })),
      { now: clock.now() },
    );
    let down = true;
    const pub = new ScriptedPublisher(() => (down ? { ok: false, error: 'publish timeout after 3000ms', timedOut: true } : { ok: true }));
    pub.reachable = false;
    const since = clock.now();
    for (let i = 0; i < 5; i++) {
      await dispatchOnce(ctx, [pub]);
      clock.advance(5_000);
    }
    const held = await rowsOf(ids);
    expect(held.map((r) => [r.status, r.attempts])).toEqual([
      ['PENDING', 0],
      ['PENDING', 0],
    ]);
    const [backlog] = await pendingByTarget(db, clock.now());
    expect(backlog).toMatchObject({
      target: 'tx:t',
      stalledSince: since,
      stalledSeconds: 25,
      headLastError: expect.stringMatching(/destination unreachable: connect ECONNREFUSED/),
    });

    down = false;
    pub.reachable = true;
    await dispatchOnce(ctx, [pub]);
    expect((await rowsOf(ids)).map((r) => [r.status, r.attempts])).toEqual([
      ['SENT', 0],
      ['SENT', 0],
    ]);
    expect(await pendingByTarget(db, clock.now())).toEqual([]);
  });

  test('an outage reported by the publisher itself needs no probe', async () => {
    const { clock, ctx } = setup();
    const [id] = await enqueueEvents(db, [{ target: 'msg', key: 'k', type: 'T', value: 1 }], { now: clock.now() });
    const pub = new ScriptedPublisher(() => ({ ok: false, error: 'KafkaJSConnectionError: connect ECONNREFUSED', unavailable: true }));
    await dispatchOnce(ctx, [pub]);
    expect(pub.probes).toBe(0);
    expect((await rowsOf([id!]))[0]).toMatchObject({ status: 'PENDING', attempts: 0 });
    expect((await pendingByTarget(db, clock.now()))[0]).toMatchObject({ target: 'msg', stalledSince: clock.now() });
  });
});
