import kafkajs from 'kafkajs';
import type { TopicMessages } from 'kafkajs';
import { cursorGroupId, transactionalId } from '../../constants.ts';
import { placements, recordingPartitioner } from './placements.ts';

type Kafka = InstanceType<typeof kafkajs.Kafka>;
type Producer = ReturnType<Kafka['producer']>;

/**
 * Exactly once into Kafka for one target (docs/outbox.md "Exactly once into Kafka"), as Kafka
 * Connect's sources do it: the batch's records and the target's cursor are written in one Kafka
 * transaction, the cursor to a compacted offsets topic keyed by target. A read_committed consumer
 * sees a batch whole or not at all, and a restarted dispatcher resumes from the cursor Kafka
 * committed. The transactional.id is fixed per stage and target, so a dispatcher that is still
 * running after its replacement started (a zombie) is fenced by the broker.
 */
export interface TxRecord {
  key: string | null;
  value: string | null;
  headers: Record<string, string>;
}

/**
 * How long the broker keeps a transaction open that was never committed or aborted (its producer
 * died or lost the connection mid-batch). Until then every read_committed consumer of the topic
 * waits at that transaction's first record; kafkajs's default is a minute. A batch's transaction
 * lasts one publish, well under this.
 */
const TRANSACTION_TIMEOUT_MS = 10_000;

/**
 * How long a start may take to read the offsets topic back before it gives up with an error (the
 * round reports it, the next one tries again): a read that cannot end is a stall, not a wait.
 */
const CURSOR_READ_TIMEOUT_MS = 60_000;

/** Where a cursor record landed in the offsets topic, and how many partitions the topic had then. */
export interface OffsetsPosition {
  topic: string;
  partition: number;
  offset: number;
  partitions: number;
}

/** What one committed transaction placed: each record (in order), and the cursor's record. */
export interface Delivered {
  placed: { partition?: number; offset?: number }[];
  cursorAt: OffsetsPosition | null;
}

export class TransactionalTarget {
  /** The partition the producer chose for each message object of a send (for its offsets). */
  readonly #partitionOf: WeakMap<object, number>;
  /** The partition count of the topic when the producer placed each message object. */
  readonly #countOf: WeakMap<object, number>;
  /** The transaction under way (settled, never rejecting), which closing waits for. */
  #inFlight: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly producer: Producer,
    readonly target: string,
    private readonly topic: string,
    private readonly offsetsTopic: string,
    partitionOf: WeakMap<object, number>,
    countOf: WeakMap<object, number>,
  ) {
    this.#partitionOf = partitionOf;
    this.#countOf = countOf;
  }

  /** Connects the target's transactional producer; connecting fences any older one of the same id. */
  static async open(kafka: Kafka, o: { stage: string; target: string; topic: string; offsetsTopic: string }): Promise<TransactionalTarget> {
    const partitionOf = new WeakMap<object, number>();
    const countOf = new WeakMap<object, number>();
    const producer = kafka.producer({
      createPartitioner: recordingPartitioner(partitionOf, countOf),
      transactionalId: transactionalId(o.stage, o.target),
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: TRANSACTION_TIMEOUT_MS,
    });
    await producer.connect();
    // kafkajs registers the transactional.id (and so fences the older producer) only when a
    // first transaction begins: an empty one does it now, before this target reads its cursor.
    await (await producer.transaction()).abort();
    return new TransactionalTarget(producer, o.target, o.topic, o.offsetsTopic, partitionOf, countOf);
  }

  /**
   * Writes the records and the cursor they end at in one transaction; aborts it on any failure.
   * Resolves where each record landed (partition and offset), in the records' order, and the cursor's.
   */
  async deliver(records: TxRecord[], cursor: string): Promise<Delivered> {
    const done = this.#deliver(records, cursor);
    this.#inFlight = done.catch(() => {});
    return done;
  }

  async #deliver(records: TxRecord[], cursor: string): Promise<Delivered> {
    const tx = await this.producer.transaction();
    try {
      // Fresh objects: the partitioner remembers each message object it placed.
      const messages = records.map((r) => ({ ...r }));
      const mark = { key: this.target, value: cursor };
      // One send for both topics: kafkajs adds every partition to the transaction in one request and
      // writes them in one produce (two round trips a send saved against a send per topic).
      const topicMessages: TopicMessages[] = [{ topic: this.offsetsTopic, messages: [mark] }];
      if (messages.length > 0) topicMessages.unshift({ topic: this.topic, messages });
      const meta = await tx.sendBatch({ topicMessages });
      const [at] = placements(
        [mark],
        this.#partitionOf,
        meta.filter((m) => m.topicName === this.offsetsTopic),
      );
      await tx.commit();
      const partitions = this.#countOf.get(mark);
      const cursorAt =
        at?.partition !== undefined && at.offset !== undefined && partitions !== undefined
          ? { topic: this.offsetsTopic, partition: at.partition, offset: at.offset, partitions }
          : null;
      const placed = placements(
        messages,
        this.#partitionOf,
        meta.filter((m) => m.topicName === this.topic),
      );
      return { placed, cursorAt };
    } catch (err) {
      await tx.abort().catch(() => {}); // a fenced producer cannot abort either; the broker already did
      throw err;
    }
  }

  /** Closes after the transaction under way, if any, has committed or aborted. */
  async close(): Promise<void> {
    await this.#inFlight;
    await this.producer.disconnect();
  }
}

/**
 * Whether nothing was written to the offsets topic's partition after the cursor record at `at`, so
 * the cursor Kafka would answer is that record's (docs/outbox.md "Exactly once into Kafka").
 *
 * kafkajs's admin answers each partition's last stable offset (checked against the broker: a record
 * of an open transaction does not move it, its commit does), the offset a read_committed read of
 * the topic ends at, so this is exactly the question readKafkaCursor's read would answer. A
 * committed transaction leaves its record at `offset` and its commit marker at `offset + 1`:
 * nothing after the record means the partition ends at `offset + 2`, no more and no less. Anything
 * else (another transaction after ours, committed or aborted, this target's or another's that
 * hashes to the same partition; a zombie's, aborted when our producer fenced it; another partition
 * count, under which the key may hash elsewhere) answers false.
 */
export async function offsetsRecordIsLast(kafka: Kafka, at: OffsetsPosition): Promise<boolean> {
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(at.topic).finally(() => admin.disconnect());
  const end = ends.find((e) => e.partition === at.partition);
  return ends.length === at.partitions && end !== undefined && Number(end.high) === at.offset + 2;
}

/**
 * The cursor Kafka last committed for `target`, read from the offsets topic with read_committed
 * (an aborted batch's cursor is never seen); null when none was ever written.
 */
export async function readKafkaCursor(kafka: Kafka, o: { stage: string; offsetsTopic: string; target: string }): Promise<string | null> {
  const { offsetsTopic, target } = o;
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(offsetsTopic).finally(() => admin.disconnect());
  const open = new Map(ends.filter((e) => Number(e.high) > Number(e.low)).map((e) => [e.partition, Number(e.high)]));
  if (open.size === 0) return null;
  const consumer = kafka.consumer({ groupId: cursorGroupId(o.stage), readUncommitted: false, maxWaitTimeInMs: 200 });
  let cursor: string | null = null;
  let timer: NodeJS.Timeout | undefined;
  await consumer.connect();
  try {
    await consumer.subscribe({ topic: offsetsTopic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `the cursor read of ${offsetsTopic} did not reach the end of partitions ${[...open.keys()].join(',')} within ${CURSOR_READ_TIMEOUT_MS / 1000} s`,
            ),
          ),
        CURSOR_READ_TIMEOUT_MS,
      );
      // The end is judged on every fetched batch, the ones kafkajs hands to no eachBatch included: a
      // partition whose tail is only transaction markers (an aborted transaction last, a segment that
      // rolled before a commit marker) ends in a batch with nothing to deliver, and waiting for an
      // eachBatch there waited for ever.
      consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
        // The end includes transaction markers, which the batch's last offset covers.
        if (Number(payload.lastOffset) + 1 >= (open.get(payload.partition) ?? 0)) open.delete(payload.partition);
        if (open.size === 0) resolve();
      });
      consumer
        .run({
          eachBatch: async ({ batch }) => {
            for (const m of batch.messages) if (m.key?.toString() === target) cursor = m.value?.toString() ?? null;
          },
        })
        .catch(reject);
    });
  } finally {
    clearTimeout(timer);
    await consumer.disconnect();
  }
  return cursor;
}
