import type { Message, Producer, ProducerConfig } from 'kafkajs';
import type { Config } from '../../config/config.ts';
import type { Log } from '../../observability/logger.ts';
import { silentLog } from '../../observability/logger.ts';
import { classifyKafkaError } from '../classify.ts';
import { createKafka } from '../kafkaClient.ts';
import { topicCatalogFor, type TopicCatalog } from '../topicCatalog.ts';
import type { OutRecord, Publisher, PublishResult } from '../types.ts';
import { placements, recordingPartitioner } from './placements.ts';

/**
 * The producer settings msgx enforces (DESIGN "Delivery rules"): idempotent, one request in flight,
 * acks=all on every send. They are constants, not configuration; nothing can override them.
 */
export const ENFORCED_PRODUCER = Object.freeze({ idempotent: true, maxInFlightRequests: 1, acks: -1 as const });

export interface KafkaPublisherOptions {
  name?: string;
  /** Deadline of one send; kafkajs' own retries are sized to end within about this long. */
  publishTimeoutMs: number;
  log?: Log;
  clientId?: string;
}

/**
 * Kafka through kafkajs. One `producer.send` per batch (all records of one topic), so a batch is
 * one produce request per partition leader. The producer is rebuilt after any failed or abandoned
 * send: its sequence numbers may be out of step, and a fatal error (fenced epoch, unknown producer
 * id, out-of-order sequence) leaves it unusable.
 */
export class KafkaPublisher implements Publisher {
  readonly name: string;
  readonly #kafka: ReturnType<typeof createKafka>;
  readonly #opts: KafkaPublisherOptions;
  readonly #log: Log;
  #producer: Producer | null = null;
  #connecting: Promise<Producer> | null = null;
  /** The partition kafkajs chose for each message object of the current send. */
  #partitionOf = new WeakMap<object, number>();
  /**
   * A send we stopped waiting for (deadline) may still be retrying inside kafkajs. No new send to
   * that topic starts before it settles: an old batch landing after a newer one would reorder the
   * topic and, on the compacted schd topic, bring an old state back.
   */
  #abandoned = new Map<string, Promise<unknown>>();
  #closed = false;
  readonly #topics: TopicCatalog;

  constructor(kafka: Config['kafka'], options: KafkaPublisherOptions) {
    this.name = options.name ?? 'kafka';
    this.#opts = options;
    this.#log = options.log ?? silentLog;
    this.#kafka = createKafka(kafka, {
      clientId: options.clientId ?? 'msgx-dispatcher',
      requestTimeoutMs: options.publishTimeoutMs,
      log: this.#log,
    });
    this.#topics = topicCatalogFor(kafka, { log: this.#log });
  }

  /** The cluster answers a metadata request: after a timeout, the send was this batch's problem. */
  async probe(signal: AbortSignal): Promise<void> {
    await raceAbort(this.#topics.refresh(), signal);
  }

  async publish(records: OutRecord[], signal: AbortSignal): Promise<PublishResult[]> {
    if (records.length === 0) return [];
    const topic = records[0]!.topic;
    let stage: 'topics' | 'connect' | 'send' = 'topics';
    try {
      // A topic the cluster does not have fails at once (kafkajs would retry the metadata miss
      // until the deadline and report a timeout); it is the route's fault, so it spends attempts.
      if (!(await raceAbort(this.#topics.has(topic), signal)))
        return records.map(() => ({
          ok: false as const,
          error: `UNKNOWN_TOPIC_OR_PARTITION: topic ${topic} does not exist on the cluster`,
        }));
      const previous = this.#abandoned.get(topic);
      if (previous) {
        await raceAbort(
          previous.catch(() => {}),
          signal,
        );
        this.#abandoned.delete(topic);
      }
      stage = 'connect';
      const producer = await raceAbort(this.#getProducer(), signal);
      stage = 'send';
      const messages: Message[] = records.map((r) => ({
        key: r.key,
        value: r.value,
        headers: r.headers,
      }));
      const sending = producer.send({
        topic,
        messages,
        acks: ENFORCED_PRODUCER.acks,
        timeout: this.#opts.publishTimeoutMs,
      });
      let meta;
      try {
        meta = await raceAbort(sending, signal);
      } catch (err) {
        if (signal.aborted) {
          // Still running inside kafkajs: remember it, and retire this producer.
          this.#abandoned.set(
            topic,
            sending.catch(() => {}),
          );
          this.#retire(producer, sending);
        } else {
          this.#retire(producer);
        }
        throw err;
      }
      return placements(messages, this.#partitionOf, meta).map((at) => ({ ok: true as const, ...at }));
    } catch (err) {
      // docs/outbox.md "Which failures spend an attempt": no broker reachable is an outage; a
      // refusal of the record or its topic is the event's; a timeout is settled by a probe.
      // A deadline that passes before a producer could even connect is the cluster's, not the event's.
      const c = signal.aborted
        ? {
            kind: stage === 'send' ? ('timeout' as const) : ('outage' as const),
            error: `publish timeout after ${this.#opts.publishTimeoutMs}ms${stage === 'send' ? '' : ` (${stage === 'connect' ? 'no producer connection' : 'no topic list'}: the cluster does not answer)`}`,
          }
        : classifyKafkaError(err);
      return records.map(() => ({ ok: false as const, error: c.error, unavailable: c.kind === 'outage', timedOut: c.kind === 'timeout' }));
    }
  }

  #getProducer(): Promise<Producer> {
    if (this.#closed) return Promise.reject(new Error('publisher closed'));
    if (this.#producer) return Promise.resolve(this.#producer);
    if (!this.#connecting) {
      const retryBudget = this.#opts.publishTimeoutMs;
      const config: ProducerConfig = {
        idempotent: ENFORCED_PRODUCER.idempotent,
        maxInFlightRequests: ENFORCED_PRODUCER.maxInFlightRequests,
        // Finite retries, so an abandoned send ends on its own about one deadline later. The
        // outbox row is the real retry (with backoff); the producer only rides out blips.
        retry: { retries: 5, initialRetryTime: Math.min(100, retryBudget / 10), maxRetryTime: Math.max(100, retryBudget / 3) },
        createPartitioner: recordingPartitioner(this.#partitionOf),
      };
      const producer = this.#kafka.producer(config);
      this.#connecting = producer
        .connect()
        .then(() => {
          this.#producer = producer;
          return producer;
        })
        .catch(async (err) => {
          await producer.disconnect().catch(() => {});
          throw err;
        })
        .finally(() => {
          this.#connecting = null;
        });
    }
    return this.#connecting;
  }

  /** Takes a producer out of use; disconnects it once its abandoned send (if any) settles. */
  #retire(producer: Producer, pending?: Promise<unknown>): void {
    if (this.#producer === producer) this.#producer = null;
    void (pending ?? Promise.resolve())
      .catch(() => {})
      .then(() => producer.disconnect())
      .catch(() => {});
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#abandoned.values()]);
    const p = this.#producer;
    this.#producer = null;
    if (p) await p.disconnect().catch(() => {});
  }
}

/** Resolves like `p`, or rejects as soon as `signal` aborts. */
export function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason ?? new Error('aborted'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
