import type { Admin } from 'kafkajs';
import type { Config } from '../config/config.ts';
import type { Log } from '../observability/logger.ts';
import { createKafka } from './kafkaClient.ts';

/**
 * The topics the Kafka cluster has, cached per process: a prepare to a topic that does
 * not exist is refused up front, /health names outbox targets whose topic is missing, and the
 * publisher fails such a send at once instead of letting kafkajs retry a metadata miss.
 * A miss refreshes the list once (a topic created a moment ago is found); hits are served from
 * the cache, which is refreshed when older than REFRESH_MS. With the file sink (no brokers) every
 * topic exists.
 */
export interface TopicCatalog {
  /** Whether the cluster has `topic`. Rejects when Kafka cannot be asked and the cache cannot tell. */
  has(topic: string): Promise<boolean>;
  /** The topics of `topics` the cluster does not have. */
  missing(topics: string[]): Promise<string[]>;
  /** Asks the cluster now (also the publisher's "does the destination answer" probe). */
  refresh(): Promise<void>;
  close(): Promise<void>;
}

const REFRESH_MS = 60_000;
/** One metadata request, bounded: the callers are an HTTP request, /health and a probe. */
const ASK_TIMEOUT_MS = 3000;

export const everyTopicExists: TopicCatalog = {
  has: async () => true,
  missing: async () => [],
  refresh: async () => {},
  close: async () => {},
};

export class KafkaTopicCatalog implements TopicCatalog {
  readonly #kafka: Config['kafka'];
  readonly #log?: Log;
  #admin: Admin | null = null;
  #connected: Promise<Admin> | null = null;
  #topics = new Set<string>();
  #at = Number.NEGATIVE_INFINITY;
  #asking: Promise<void> | null = null;

  constructor(kafka: Config['kafka'], deps: { log?: Log } = {}) {
    this.#kafka = kafka;
    this.#log = deps.log;
  }

  async has(topic: string): Promise<boolean> {
    const fresh = Date.now() - this.#at < REFRESH_MS;
    if (fresh && this.#topics.has(topic)) return true;
    try {
      await this.refresh();
    } catch (err) {
      // A stale hit is still an answer; a miss that cannot be checked is not.
      if (this.#topics.has(topic)) return true;
      throw err;
    }
    return this.#topics.has(topic);
  }

  async missing(topics: string[]): Promise<string[]> {
    const out: string[] = [];
    for (const t of topics) if (!(await this.has(t))) out.push(t);
    return out;
  }

  refresh(): Promise<void> {
    // Concurrent misses share one metadata request.
    this.#asking ??= this.#ask().finally(() => (this.#asking = null));
    return this.#asking;
  }

  async #ask(): Promise<void> {
    const admin = await this.#connect();
    const topics = await bounded(admin.listTopics(), ASK_TIMEOUT_MS, 'Kafka metadata (list topics)');
    this.#topics = new Set(topics);
    this.#at = Date.now();
  }

  #connect(): Promise<Admin> {
    if (this.#admin) return Promise.resolve(this.#admin);
    this.#connected ??= (async () => {
      // Few retries: a refused connection must answer "unreachable" at once, not after kafkajs'
      // default back-off of many seconds (the caller is a request, /health or a probe).
      const retry = { retries: 1, initialRetryTime: 100, maxRetryTime: 500 };
      const admin = createKafka(this.#kafka, { clientId: 'msgx-topics', requestTimeoutMs: ASK_TIMEOUT_MS, log: this.#log, retry }).admin({
        retry,
      });
      try {
        await bounded(admin.connect(), ASK_TIMEOUT_MS, 'Kafka connect');
      } catch (err) {
        await admin.disconnect().catch(() => {});
        throw err;
      }
      this.#admin = admin;
      return admin;
    })().finally(() => (this.#connected = null));
    return this.#connected;
  }

  async close(): Promise<void> {
    const a = this.#admin;
    this.#admin = null;
    if (a) await a.disconnect().catch(() => {});
  }
}

const catalogs = new Map<string, TopicCatalog>();

/** The process's catalog for this cluster (one admin connection however many callers). */
export function topicCatalogFor(kafka: Config['kafka'], deps: { log?: Log } = {}): TopicCatalog {
  if (kafka.brokers.length === 0) return everyTopicExists;
  const key = JSON.stringify([kafka.brokers, kafka.ssl, kafka.iamRegion ?? null]);
  let c = catalogs.get(key);
  if (!c) catalogs.set(key, (c = new KafkaTopicCatalog(kafka, deps)));
  return c;
}

function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(Object.assign(new Error(`${what} did not answer within ${ms} ms`), { name: 'TimeoutError' })), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e) => (clearTimeout(t), reject(e)),
    );
  });
}
