import type { Config } from '../config/config.ts';
import { topicForTarget } from '../outbox/publish.ts';
import { topicCatalogFor } from '../outbox/topicCatalog.ts';
import { TxTopicCheckUnavailableError, TxTopicNotAllowedError, TxTopicReservedError, TxUnknownTopicError } from './errors.ts';

/** The Kafka topics of the producers' topics MSGX_TX_TOPICS lists: created at deploy and at the twin's start. */
export function listedTxTopics(config: Pick<Config, 'kafka' | 'outbox' | 'shadow' | 'txmsg'>): string[] {
  return config.txmsg.topics.map((t) => topicForTarget(config, `tx:${t}`)!);
}

/**
 * A producer may only name a topic msgx can deliver to: one listed in MSGX_TX_TOPICS
 * when that is set, not one of msgx's own, and one the cluster has (cached metadata, refreshed on a
 * miss). Checked before anything is stored, so a refused prepare leaves nothing behind. With the
 * file sink every other topic exists.
 */
export async function checkTxTopic(config: Pick<Config, 'kafka' | 'outbox' | 'shadow' | 'txmsg'>, topic: string): Promise<void> {
  const allowed = config.txmsg.topics;
  if (allowed.length > 0 && !allowed.includes(topic)) throw new TxTopicNotAllowedError(topic, allowed);
  const actual = topicForTarget(config, `tx:${topic}`)!;
  // msgx.msg's consumers read flight events only, and a record keyed by a FLID on the compacted
  // msgx.schd would replace that flight's state: neither takes a producer's message (file sink too).
  if (actual === config.outbox.topicMsg) throw new TxTopicReservedError(actual, 'MSGX_TOPIC_MSG');
  if (actual === config.outbox.topicSchd) throw new TxTopicReservedError(actual, 'MSGX_TOPIC_SCHD');
  let exists: boolean;
  try {
    exists = await topicCatalogFor(config.kafka).has(actual);
  } catch (err) {
    throw new TxTopicCheckUnavailableError(actual, err instanceof Error ? err.message : String(err));
  }
  if (!exists) throw new TxUnknownTopicError(actual);
}
