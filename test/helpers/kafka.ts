/** Outbox test helpers: a programmable fake publisher, a memory log, and real-Kafka helpers. */
import { randomBytes } from 'node:crypto';
import kafkajs from 'kafkajs';
import type { OutRecord, Publisher, PublishResult } from '../../lib/outbox/types.ts';
import type { Log } from '../../lib/observability/logger.ts';

const { Kafka, logLevel } = kafkajs;

/**
 * A publisher for tests: remembers every record it was given (in call order) and answers by a
 * programmable behaviour: ok, fail some event ids, fail everything, or hang until the deadline.
 */
export class FakePublisher implements Publisher {
  readonly calls: OutRecord[][] = [];
  /** Records that were "delivered" (a publish that answered ok), in order. */
  readonly delivered: OutRecord[] = [];
  mode: 'ok' | 'fail' | 'hang' = 'ok';
  failIds = new Set<number>();
  error = 'broker said no';

  constructor(readonly name = 'fake') {}

  async publish(records: OutRecord[], signal: AbortSignal): Promise<PublishResult[]> {
    this.calls.push(records);
    if (this.mode === 'hang') {
      await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
    }
    if (this.mode === 'fail') return records.map(() => ({ ok: false as const, error: this.error }));
    let failed = false;
    return records.map((r, i) => {
      if (failed) return { ok: false as const, error: 'not sent', notAttempted: true };
      if (this.failIds.has(r.eventId)) {
        failed = true;
        return { ok: false as const, error: this.error };
      }
      this.delivered.push(r);
      return { ok: true as const, partition: 0, offset: this.delivered.length - 1 + 0 * i };
    });
  }

  async close(): Promise<void> {}
}

/** A Log that keeps its lines, for asserting what was (not) logged. */
export function memoryLog(): Log & { lines: { level: string; line: Record<string, unknown> }[] } {
  const lines: { level: string; line: Record<string, unknown> }[] = [];
  const at = (level: string) => (line: unknown) => {
    lines.push({ level, line: (typeof line === 'string' ? { message: line } : line) as Record<string, unknown> });
  };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } as never;
}

// ---- Real Kafka ----------------------------------------------------------------------------

/** Creates topics on the real broker and waits until each partition has a leader (as `msgx migrate` does). */
export async function createTopics(
  brokers: string[],
  topics: { topic: string; numPartitions?: number; configEntries?: { name: string; value: string }[] }[],
): Promise<void> {
  // Loaded here, not at the top: the cloud tier reads topics with this file and runs none of msgx's code.
  const { createTopicsWithLeaders } = await import('../../lib/outbox/topics.ts');
  const admin = new Kafka({ clientId: 'msgx-test-admin', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    await createTopicsWithLeaders(
      admin,
      topics.map((t) => ({ numPartitions: 1, ...t })),
    );
  } finally {
    await admin.disconnect();
  }
}

/** A topic name of its own for each test (never shared with another test or run). */
export const randomTopic = (prefix = 'msgx-test') => `${prefix}.${Date.now().toString(36)}.${randomBytes(4).toString('hex')}`;

export interface ReadRecord {
  topic: string;
  partition: number;
  offset: number;
  key: string | null;
  value: string | null;
  headers: Record<string, string>;
}

/** kafkajs's own cluster factory (a private symbol of the Kafka object): the only way to list offsets read_uncommitted. */
type ClusterFactory = (o: { isolationLevel: number }) => {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  findTopicPartitionMetadata(topic: string): { partitionId: number }[];
  fetchTopicsOffset(
    t: { topic: string; fromBeginning: boolean; partitions: { partition: number }[] }[],
  ): Promise<{ partitions: { partition: number; offset: string }[] }[]>;
};

/** Each partition's high watermark (what read_uncommitted answers: every record written, open transactions included). */
async function highWatermarks(kafka: InstanceType<typeof Kafka>, topic: string): Promise<Map<number, number>> {
  const symbol = Object.getOwnPropertySymbols(kafka).find((s) => s.description === 'private:Kafka:createCluster');
  if (!symbol) throw new Error('kafkajs changed: no cluster factory to list high watermarks with');
  const cluster = (kafka as unknown as Record<symbol, ClusterFactory>)[symbol]!({ isolationLevel: 0 });
  await cluster.connect();
  try {
    await cluster.addTargetTopic(topic);
    const partitions = cluster.findTopicPartitionMetadata(topic).map((p) => ({ partition: p.partitionId }));
    const [answer] = await cluster.fetchTopicsOffset([{ topic, fromBeginning: false, partitions }]);
    return new Map(answer!.partitions.map((p) => [p.partition, Number(p.offset)]));
  } finally {
    await cluster.disconnect();
  }
}

/**
 * Each partition's last stable offset once the transactions committed before the call show in it.
 * A commit returns when the coordinator logged it; its markers reach the partitions a moment later,
 * and until they do the committed records are not yet readable. So the ends wait (up to 5 s) until
 * they reach the high watermark taken first; a transaction that is really open (a zombie's) keeps
 * its partition's end before it, as a read_committed consumer would.
 */
export async function committedEnds(kafka: InstanceType<typeof Kafka>, topic: string) {
  const written = await highWatermarks(kafka, topic);
  const admin = kafka.admin();
  await admin.connect();
  try {
    for (let waited = 0; ; waited += 25) {
      const ends = await admin.fetchTopicOffsets(topic); // kafkajs's admin answers the last stable offset
      if (waited >= 5_000 || ends.every((e) => Number(e.high) >= (written.get(e.partition) ?? 0))) return ends;
      await new Promise((r) => setTimeout(r, 25));
    }
  } finally {
    await admin.disconnect();
  }
}

/** Each partition's high watermark and log start: the ends a read_uncommitted read goes to. */
async function uncommittedEnds(kafka: InstanceType<typeof Kafka>, topic: string) {
  const high = await highWatermarks(kafka, topic);
  const admin = kafka.admin();
  await admin.connect();
  const starts = await admin.fetchTopicOffsets(topic).finally(() => admin.disconnect());
  return starts.map((e) => ({ partition: e.partition, low: e.low, high: String(high.get(e.partition) ?? e.high) }));
}

/**
 * Reads EVERY record of `topic` up to each partition's end (its last stable offset, commits in flight at the call included), the ends taken
 * at the call: call it once the writers stopped (or once the outcome the test waits for is seen),
 * so that the read covers everything written. A partition is read until its end, not until some
 * total count arrived, so a duplicate or a late record on one partition is never cut off by many
 * on another; nothing beyond those ends is returned. Per partition in offset order, partitions
 * concatenated. Throws naming the partitions not read to their end when the time runs out. With
 * `readUncommitted`, as a read_uncommitted consumer: to the high watermarks, the records of aborted
 * and open transactions included.
 */
export async function readTopicToEnd(
  brokers: string[],
  topic: string,
  options: { timeoutMs?: number; readUncommitted?: boolean } = {},
): Promise<ReadRecord[]> {
  const kafka = new Kafka({ clientId: 'msgx-test-reader', brokers, logLevel: logLevel.NOTHING });
  const ends = options.readUncommitted ? await uncommittedEnds(kafka, topic) : await committedEnds(kafka, topic);
  const high = new Map(ends.map((e) => [e.partition, Number(e.high)]));
  // Partitions with something to read, and the last offset each must reach.
  const open = new Map(ends.filter((e) => Number(e.high) > Number(e.low)).map((e) => [e.partition, Number(e.high) - 1]));
  if (open.size === 0) return [];
  const consumer = kafka.consumer({
    groupId: `msgx-test-${randomBytes(6).toString('hex')}`,
    maxWaitTimeInMs: 200,
    readUncommitted: options.readUncommitted ?? false,
  });
  const got: ReadRecord[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    let done!: () => void;
    const finished = new Promise<void>((r) => (done = r));
    // The end is judged on every fetched batch, also one kafkajs hands to no eachBatch (only
    // transaction markers or aborted records: the tail of a partition a fenced producer wrote last).
    // Its last offset also covers offsets that hold no record any more (a compacted topic).
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      const last = open.get(payload.partition);
      if (last !== undefined && Number(payload.lastOffset) >= last) open.delete(payload.partition);
      if (open.size === 0) done();
    });
    await consumer.run({
      eachBatchAutoResolve: true,
      eachBatch: async ({ batch }) => {
        const end = high.get(batch.partition) ?? 0;
        for (const m of batch.messages) {
          if (Number(m.offset) >= end) continue; // written after the ends were taken
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(m.headers ?? {})) headers[k] = v === undefined ? '' : String(v);
          got.push({
            topic: batch.topic,
            partition: batch.partition,
            offset: Number(m.offset),
            key: m.key === null ? null : m.key.toString(),
            value: m.value === null ? null : m.value.toString(),
            headers,
          });
        }
      },
    });
    const timeoutMs = options.timeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      finished,
      new Promise<void>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `readTopicToEnd ${topic}: partitions ${[...open.keys()].join(',')} not read to their end after ${timeoutMs} ms (${got.length} records read)`,
              ),
            ),
          timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  } finally {
    await consumer.disconnect().catch(() => {});
  }
  return got.sort((a, b) => a.partition - b.partition || a.offset - b.offset);
}
