import type { Config } from '../config/config.ts';
import type { Queryable } from '../db/db.ts';
import { topicForTarget } from './publish.ts';
import { topicCatalogFor } from './topicCatalog.ts';

export interface MissingTopic {
  /** 'msg', 'schd', 'tx:<topic>', or 'MSGX_TX_TOPICS' for a listed topic nothing waits for yet. */
  target: string;
  topic: string;
  /** Open (PENDING or DELIVERING) events waiting for it. */
  open: number;
}

/**
 * The topics msgx must write that the cluster does not have: the topic of every
 * target with open events, and every topic listed in MSGX_TX_TOPICS. Reported by /health
 * and logged at start, so a missing topic is seen before anyone wonders why nothing arrives.
 * Rejects when Kafka cannot be asked (then the kafka check fails anyway). None with the file sink.
 */
export async function missingTopics(config: Pick<Config, 'kafka' | 'outbox' | 'shadow' | 'txmsg'>, db: Queryable): Promise<MissingTopic[]> {
  if (config.kafka.brokers.length === 0) return [];
  const r = await db.query<{ target: string; open: number }>(
    // Open events as msgx_outbox_open derives them (migration 014): one probe per target, then its open range.
    `SELECT target, count(*)::int AS open FROM msgx_outbox_open(now()) GROUP BY target`,
  );
  const wanted = new Map<string, MissingTopic>();
  const add = (target: string, open: number) => {
    const topic = topicForTarget(config, target);
    if (topic && !wanted.has(topic)) wanted.set(topic, { target, topic, open });
  };
  for (const row of r.rows) add(row.target, row.open);
  for (const t of config.txmsg.topics) add(`tx:${t}`, 0);
  const catalog = topicCatalogFor(config.kafka);
  const missing = new Set(await catalog.missing([...wanted.keys()]));
  return [...wanted.values()].filter((w) => missing.has(w.topic));
}

/** One line naming each missing topic and what waits for it. */
export function describeMissing(list: MissingTopic[]): string {
  return list.map((m) => `${m.topic} (target ${m.target}${m.open ? `, ${m.open} events waiting` : ''})`).join(', ');
}
