import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { dispatchOnce, type DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import { createTopics, randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, type TestPg } from '../helpers/services.ts';

/**
 * The relay's outcome log (outbox_batch, lib/outbox/batchLog.ts) when a transaction commits late:
 * its event goes in a later batch whose id range lies inside an earlier batch's range, and each
 * event's row is still the batch that carried it, judged by what a consumer of our own read.
 */
const brokers = serviceUrls().kafkaBrokers;
const topic = randomTopic('msgx-batchlog');
const target = `tx:${topic}`;
let t: TestPg;
let kafka: KafkaPublisher;
let ctx: DispatchContext;

beforeAll(async () => {
  await createTopics(brokers, [{ topic, numPartitions: 2 }]);
  t = await freshPg();
  const config = loadConfig({ MSGX_KAFKA_BROKERS: brokers.join(',') });
  kafka = new KafkaPublisher(config.kafka, { publishTimeoutMs: 10_000 });
  ctx = { db: t.db, config, clock: systemClock, log: silentLog };
}, 60_000);
afterAll(async () => {
  await kafka?.close();
  await t?.drop();
});

/** A writer of its own, with its transaction left open, inserting as any service would. */
async function writer(): Promise<{ insert(key: string): Promise<number>; commit(): Promise<void> }> {
  const c = new pg.Client({ connectionString: t.url });
  c.on('error', () => {});
  await c.connect();
  await c.query('BEGIN');
  return {
    async insert(key) {
      const r = await c.query<{ event_id: string }>(
        `INSERT INTO msg_event (target, partition_key, event_type, value) VALUES ($1, $2, 'T', $2) RETURNING event_id`,
        [target, key],
      );
      return Number(r.rows[0]!.event_id);
    },
    async commit() {
      await c.query('COMMIT');
      await c.end();
    },
  };
}

const drain = async () => {
  for (
    let r = await dispatchOnce(ctx, [kafka], { targets: [target] });
    r.more;
    r = await dispatchOnce(ctx, [kafka], { targets: [target] })
  );
};

it('an event that committed late is found in its own batch, not in the earlier batch whose range holds its id', async () => {
  const first = await writer();
  const late = await writer();
  const other = await writer();
  const ids = [await first.insert('a'), await late.insert('late'), await other.insert('b'), await first.insert('c')];
  await first.commit();
  await other.commit();
  await drain(); // a, b, c: one batch, its range spans the late id
  await late.commit();
  await drain(); // late: a batch of its own, inside that range

  const ranges = await t.db.query<{ lo: string; hi: string }>(
    `SELECT lo_id::text AS lo, hi_id::text AS hi FROM outbox_batch WHERE target = $1 ORDER BY sent_at, lo_id`,
    [target],
  );
  expect(ranges.rows.map((r) => [Number(r.lo), Number(r.hi)])).toEqual([
    [ids[0], ids[3]],
    [ids[1], ids[1]],
  ]);

  // The oracle: where a consumer found each event's record.
  const read = await readTopicToEnd(brokers, topic);
  expect(read).toHaveLength(4);
  for (const id of ids) {
    const found = read.filter((r) => r.headers['msgx-event-id'] === String(id)).map((r) => [r.partition, String(r.offset)]);
    const logged = await t.db.query<{ publisher: string; partition: number; offset: string; tries: number }>(
      `SELECT publisher, partition, "offset"::text AS offset, tries FROM msgx_event_deliveries($1, $2)`,
      [target, id],
    );
    expect(
      logged.rows.map((r) => [r.partition, r.offset]),
      `event ${id}`,
    ).toEqual(found);
    expect(logged.rows.map((r) => [r.publisher, r.tries])).toEqual([['kafka', 1]]);
  }

  // The lookup reads the range index, not every batch.
  const plan = await t.db.tx(async (q) => {
    await q.query('SET LOCAL enable_seqscan = off'); // a few rows: the planner would rather read them all
    return q.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN SELECT 1 FROM outbox_batch b WHERE int8range(b.lo_id, b.hi_id, '[]') @> $1::bigint AND b.target = $2 AND $1 = ANY (b.event_ids)`,
      [ids[1], target],
    );
  });
  expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('outbox_batch_ids');
}, 60_000);
