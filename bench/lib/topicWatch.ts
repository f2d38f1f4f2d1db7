import { randomBytes } from 'node:crypto';
import kafkajs from 'kafkajs';
import { serviceUrls } from './env.ts';
import { sleep } from './stats.ts';

const { Kafka, logLevel } = kafkajs;

/**
 * A real consumer of msgx.msg, as a downstream system reads it (read_committed): when each
 * mailbox message's first record arrived (its `source.msgId`), and how many records each one
 * had. What the bench calls "delivered" is what this consumer saw, not what msgx's tables say.
 */
export interface TopicWatch {
  /** performance.now() of the first record of each mailbox message. */
  readonly firstSeen: Map<number, number>;
  readonly records: Map<number, number>;
  /** Resolves once `ids` have all been seen; rejects after `timeoutMs`. */
  waitFor(ids: Iterable<number>, timeoutMs: number, what: string): Promise<void>;
  stop(): Promise<void>;
}

export async function watchTopic(topic: string): Promise<TopicWatch> {
  const kafka = new Kafka({ clientId: 'msgx-bench-watch', brokers: serviceUrls().kafkaBrokers, logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `msgx-bench-${randomBytes(4).toString('hex')}`, maxWaitTimeInMs: 50, readUncommitted: false });
  const firstSeen = new Map<number, number>();
  const records = new Map<number, number>();
  let joined = false;
  consumer.on(consumer.events.GROUP_JOIN, () => (joined = true));
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachBatchAutoResolve: true,
    eachBatch: async ({ batch }) => {
      const at = performance.now();
      for (const m of batch.messages) {
        const id = (JSON.parse(m.value?.toString() ?? 'null') as { source?: { msgId?: number } } | null)?.source?.msgId;
        if (typeof id !== 'number') continue;
        if (!firstSeen.has(id)) firstSeen.set(id, at);
        records.set(id, (records.get(id) ?? 0) + 1);
      }
    },
  });
  const until = Date.now() + 30_000;
  while (!joined) {
    if (Date.now() > until) throw new Error(`the bench consumer did not join its group on ${topic} within 30 s`);
    await sleep(20);
  }
  return {
    firstSeen,
    records,
    async waitFor(ids, timeoutMs, what) {
      const wanted = [...ids];
      const deadline = Date.now() + timeoutMs;
      while (wanted.some((id) => !firstSeen.has(id))) {
        if (Date.now() > deadline)
          throw new Error(
            `${what}: ${wanted.filter((id) => !firstSeen.has(id)).length} of ${wanted.length} not on ${topic} within ${timeoutMs} ms`,
          );
        await sleep(5);
      }
    },
    stop: () => consumer.disconnect(),
  };
}
