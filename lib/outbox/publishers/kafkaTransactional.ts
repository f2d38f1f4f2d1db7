import kafkajs from 'kafkajs';
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

export class TransactionalTarget {
  /** The partition the producer chose for each message object of a send (for its offsets). */
  readonly #partitionOf: WeakMap<object, number>;
  /** The transaction under way (settled, never rejecting), which closing waits for. */
  #inFlight: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly producer: Producer,
    readonly target: string,
    private readonly topic: string,
    private readonly offsetsTopic: string,
    partitionOf: WeakMap<object, number>,
  ) {
    this.#partitionOf = partitionOf;
  }

  /** Connects the target's transactional producer; connecting fences any older one of the same id. */
  static async open(kafka: Kafka, o: { stage: string; target: string; topic: string; offsetsTopic: string }): Promise<TransactionalTarget> {
    const partitionOf = new WeakMap<object, number>();
    const producer = kafka.producer({
      createPartitioner: recordingPartitioner(partitionOf),
      transactionalId: transactionalId(o.stage, o.target),
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: TRANSACTION_TIMEOUT_MS,
    });
    await producer.connect();
    // kafkajs registers the transactional.id (and so fences the older producer) only when a
    // first transaction begins: an empty one does it now, before this target reads its cursor.
    await (await producer.transaction()).abort();
    return new TransactionalTarget(producer, o.target, o.topic, o.offsetsTopic, partitionOf);
  }

  /**
   * Writes the records and the cursor they end at in one transaction; aborts it on any failure.
   * Resolves where each record landed (partition and offset), in the records' order.
   */
  async deliver(records: TxRecord[], cursor: string): Promise<{ partition?: number; offset?: number }[]> {
    const done = this.#deliver(records, cursor);
    this.#inFlight = done.catch(() => {});
    return done;
  }

  async #deliver(records: TxRecord[], cursor: string): Promise<{ partition?: number; offset?: number }[]> {
    const tx = await this.producer.transaction();
    try {
      // Fresh objects: the partitioner remembers each message object it placed.
      const messages = records.map((r) => ({ ...r }));
      const meta = messages.length > 0 ? await tx.send({ topic: this.topic, messages }) : [];
      await tx.send({ topic: this.offsetsTopic, messages: [{ key: this.target, value: cursor }] });
      await tx.commit();
      return placements(messages, this.#partitionOf, meta);
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
  await consumer.connect();
  try {
    await consumer.subscribe({ topic: offsetsTopic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      consumer
        .run({
          eachBatch: async ({ batch }) => {
            for (const m of batch.messages) if (m.key?.toString() === target) cursor = m.value?.toString() ?? null;
            // The high watermark includes transaction markers, which the batch's last offset covers.
            if (Number(batch.lastOffset()) + 1 >= (open.get(batch.partition) ?? 0)) open.delete(batch.partition);
            if (open.size === 0) resolve();
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return cursor;
}
