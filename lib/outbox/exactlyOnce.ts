import type { Config } from '../config/config.ts';
import type { Queryable } from '../db/db.ts';
import type { Log } from '../observability/logger.ts';
import { adoptCursor, databaseIdentity, mirroredPosition, type Cursor } from './commitLog.ts';
import { createKafka } from './kafkaClient.ts';
import {
  offsetsRecordIsLast,
  readKafkaCursor,
  TransactionalTarget,
  type Delivered,
  type TxRecord,
} from './publishers/kafkaTransactional.ts';

/**
 * The Kafka side of the log relay when MSGX_KAFKA_EXACTLY_ONCE is on (docs/outbox.md "Exactly once
 * into Kafka"): one transactional producer per target, opened the first time this process delivers
 * the target (which fences any older producer of the same transactional.id, a zombie dispatcher),
 * then the cursor Kafka committed is adopted, since Kafka is ahead of PostgreSQL when a dispatcher
 * died between its Kafka commit and the mirror (unless the mirror's offsets record is provably the
 * last: then PostgreSQL's cursor is Kafka's, and the topic is not read). A producer whose transaction failed is dropped: the
 * next batch opens and adopts again.
 */
export class ExactlyOnceSinks {
  /** The name of the publisher the transactional producer stands in for (the fan-out's Kafka). */
  readonly replaces = 'kafka';
  readonly #kafka: ReturnType<typeof createKafka>;
  readonly #open = new Map<string, Promise<TransactionalTarget>>();
  /** Producers dropped while a page may still publish on them. */
  readonly #retired = new Map<string, Promise<TransactionalTarget>>();
  readonly #log: Log | undefined;
  /** This database's identity, stamped on every cursor committed to Kafka (read at the first prepare). */
  #identity: string | undefined;

  constructor(
    private readonly config: Pick<Config, 'kafka' | 'outbox'>,
    deps: { log?: Log } = {},
  ) {
    this.#kafka = createKafka(config.kafka, { clientId: 'msgx-eos', requestTimeoutMs: config.outbox.publishTimeoutMs, log: deps.log });
    this.#log = deps.log;
  }

  /**
   * The `<stage>` of this deployment's transactional ids and cursor group (MSGX_STAGE, which the
   * cloud's IAM grant names; test/infra/exactly-once-grants.test.ts holds the two together).
   */
  get stage(): string {
    return this.config.outbox.stage;
  }

  /** Opens the target's producer and adopts Kafka's cursor, once; the caller holds the target's lease. */
  async prepare(db: Queryable, target: string, topic: string): Promise<TransactionalTarget> {
    let p = this.#open.get(target);
    if (!p) {
      p = (async () => {
        await this.#closeRetired(target);
        const sink = await TransactionalTarget.open(this.#kafka, {
          stage: this.stage,
          target,
          topic,
          offsetsTopic: this.config.outbox.topicOffsets,
        });
        this.#identity ??= await databaseIdentity(db);
        // After the open: a zombie's transaction is aborted by now, so it shows in the offsets topic.
        if (await this.#mirrorIsCurrent(db, target)) return sink;
        const committed = await readKafkaCursor(this.#kafka, { stage: this.stage, offsetsTopic: this.config.outbox.topicOffsets, target });
        if (committed !== null) {
          const refusal = await adoptCursor(db, target, JSON.parse(committed) as Cursor, this.#identity);
          // Another database's cursor (a fresh or restored database on an old offsets topic): this
          // database's own cursor stands, and the next commit overwrites Kafka's.
          if (refusal !== null)
            this.#log?.warn(`kept the database's own cursor: Kafka's is not adopted, ${refusal}`, {
              target,
              offsetsTopic: this.config.outbox.topicOffsets,
            });
        }
        return sink;
      })();
      this.#open.set(target, p);
      p.catch(() => this.#open.delete(target));
    }
    return p;
  }

  /**
   * Whether PostgreSQL's cursor is the one Kafka would answer: its offsets record (as the mirror
   * recorded it) is still the last of its partition. Then reading the topic back (a consumer group
   * join, ~3 s on MSK, at every Lambda cold start) is skipped. Any doubt reads it.
   */
  async #mirrorIsCurrent(db: Queryable, target: string): Promise<boolean> {
    const at = await mirroredPosition(db, target);
    if (at === null || at.topic !== this.config.outbox.topicOffsets) return false;
    const last = await offsetsRecordIsLast(this.#kafka, at).catch((err: unknown) => {
      this.#log?.warn('reading the offsets topic back: its end offsets could not be fetched', { target, error: String(err) });
      return false;
    });
    if (last) this.#log?.info(`cursor from PostgreSQL (offsets record ${at.offset} is the last)`, { target, partition: at.partition });
    return last;
  }

  /** Whether the target's producer is open (its cursor adopted) in this process. */
  isOpen(target: string): boolean {
    return this.#open.has(target);
  }

  /**
   * One Kafka transaction: the records and the cursor they end at (where each record landed, and
   * the cursor's record); a failure drops the producer.
   */
  async deliver(target: string, sink: TransactionalTarget, records: TxRecord[], cursor: Cursor): Promise<Delivered> {
    try {
      return await sink.deliver(records, JSON.stringify({ ...cursor, db: this.#identity }));
    } catch (err) {
      this.#open.delete(target);
      await sink.close().catch(() => {});
      throw err;
    }
  }

  /**
   * Forgets the target's producer after a page whose PostgreSQL mirror did not land: Kafka's cursor
   * is then ahead of the database's, and the next page must reopen and adopt it, not read on from
   * the older one (which would send that page's events again).
   */
  drop(target: string): void {
    const p = this.#open.get(target);
    this.#open.delete(target);
    // The page behind it may be publishing on this producer: it is closed when the target reopens.
    if (p) this.#retired.set(target, p);
  }

  async #closeRetired(target: string): Promise<void> {
    const p = this.#retired.get(target);
    this.#retired.delete(target);
    await p?.then((sink) => sink.close()).catch(() => {});
  }

  async close(): Promise<void> {
    const all = [...this.#open.values(), ...this.#retired.values()];
    this.#open.clear();
    this.#retired.clear();
    await Promise.allSettled(all.map(async (p) => (await p).close()));
  }
}
