import kafkajs from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readKafkaCursor, TransactionalTarget } from '../../lib/outbox/publishers/kafkaTransactional.ts';
import { createTopics, randomTopic } from '../helpers/kafka.ts';
import { serviceUrls } from '../helpers/services.ts';

/**
 * Exactly once into Kafka for one target (lib/outbox/publishers/kafkaTransactional.ts): records and
 * cursor in one transaction, judged by a read_committed consumer of the test's own.
 */
const topic = randomTopic('msgx-eos');
const offsets = `${topic}.offsets`;
const target = `tx:${topic}`;
let kafka: InstanceType<typeof kafkajs.Kafka>;

beforeAll(async () => {
  const brokers = serviceUrls().kafkaBrokers;
  await createTopics(brokers, [{ topic }, { topic: offsets, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }]);
  kafka = new kafkajs.Kafka({ clientId: 'msgx-test-eos', brokers, logLevel: kafkajs.logLevel.NOTHING });
}, 60_000);
afterAll(() => {});

/** Every committed record of the topic, as a read_committed consumer sees it. */
async function committedValues(): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  const [end] = await admin.fetchTopicOffsets(topic).finally(() => admin.disconnect());
  const high = Number(end!.high);
  const consumer = kafka.consumer({ groupId: randomTopic('g'), readUncommitted: false, maxWaitTimeInMs: 200 });
  const got: string[] = [];
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise<void>((resolve) => {
    void consumer.run({
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) got.push(m.value?.toString() ?? '');
        if (Number(batch.lastOffset()) + 1 >= high) resolve();
      },
    });
  });
  await consumer.disconnect();
  return got;
}

const rec = (v: string) => ({ key: 'k', value: v, headers: { 'msgx-event-id': v } });

it('a batch and its cursor commit together; a zombie producer is fenced and its batch never seen; the cursor is read back from Kafka', async () => {
  const first = await TransactionalTarget.open(kafka, { stage: 'test', target, topic, offsetsTopic: offsets });
  await first.deliver([rec('1'), rec('2')], 'cursor-2');

  // The replacement of a dispatcher thought dead: same transactional.id, so the old one is fenced.
  const second = await TransactionalTarget.open(kafka, { stage: 'test', target, topic, offsetsTopic: offsets });
  await expect(first.deliver([rec('zombie')], 'cursor-zombie')).rejects.toThrow();
  expect(await readKafkaCursor(kafka, offsets, target)).toBe('cursor-2');
  await second.deliver([rec('3')], 'cursor-3');

  expect(await committedValues()).toEqual(['1', '2', '3']);
  expect(await readKafkaCursor(kafka, offsets, target)).toBe('cursor-3');
  await second.close();
  await first.close().catch(() => {});
}, 60_000);
