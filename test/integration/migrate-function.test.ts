import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import kafkajs from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomTopic } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, type TestPg } from '../helpers/services.ts';

const REPO = join(import.meta.dirname, '..', '..');
/** The migrations the repository ships, read as files: the oracle for what a first deploy applies. */
const SHIPPED = readdirSync(join(REPO, 'migrations'))
  .filter((f) => /^\d+_.+\.sql$/.test(f))
  .sort();

/**
 * The deploy-time trigger as CloudFormation runs it on a first deploy: the migrate function
 * against a PostgreSQL database that has nothing in it, then again on the next deploy. The
 * function must need the database alone: nothing may read msgx's tables before they exist.
 * (Breaking it: checking the identity mode before migrate() fails the first call with
 * `relation "msgx_state" does not exist`.)
 */
describe('migrate function on an empty database', () => {
  let pg: TestPg;
  const saved = { ...process.env };
  const topics = { msg: randomTopic('msgx.msg'), schd: randomTopic('msgx.schd'), offsets: randomTopic('msgx.offsets') };

  beforeAll(async () => {
    pg = await freshPg({ migrate: false });
    Object.assign(process.env, {
      MSGX_RUNTIME: 'lambda',
      MSGX_PG_URL: pg.url,
      MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
      MSGX_TOPIC_MSG: topics.msg,
      MSGX_TOPIC_SCHD: topics.schd,
      MSGX_TOPIC_OFFSETS: topics.offsets,
      MSGX_LOG_LEVEL: 'ERROR',
    });
  });
  afterAll(async () => {
    process.env = saved;
    await pg?.drop();
  });

  it('applies every shipped migration and creates the topics; the next deploy changes nothing', async () => {
    const tables = async () =>
      (await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'`)).rows[0]!
        .n;
    expect(await tables()).toBe(0);

    const { handler } = await import('../../functions/migrate.ts');
    const first = await handler({}, { getRemainingTimeInMillis: () => 300_000 });
    expect(first.applied).toEqual(SHIPPED);
    expect(first.alreadyApplied).toBe(0);
    // With exactly once (the default with brokers) the targets' cursors get their compacted topic too.
    expect(first.topicsCreated.sort()).toEqual([topics.msg, topics.schd, topics.offsets].sort());
    const afterFirst = await tables();
    expect(afterFirst).toBeGreaterThan(0);

    // Seen from outside: the broker has the topics.
    const admin = new kafkajs.Kafka({ brokers: serviceUrls().kafkaBrokers, logLevel: kafkajs.logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      expect(await admin.listTopics()).toEqual(expect.arrayContaining([topics.msg, topics.schd]));
    } finally {
      await admin.disconnect();
    }

    const second = await handler();
    expect(second).toEqual({ applied: [], alreadyApplied: SHIPPED.length, topicsCreated: [] });
    expect(await tables()).toBe(afterFirst);
  });
});
