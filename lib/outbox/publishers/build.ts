import { join, resolve } from 'node:path';
import type { Config } from '../../config/config.ts';
import type { Log } from '../../observability/logger.ts';
import type { Clock } from '../../shared/clock.ts';
import { ConfigError } from '../../shared/errors.ts';
import type { Publisher } from '../types.ts';
import { ExactlyOnceSinks } from '../exactlyOnce.ts';
import { FileSinkPublisher } from './file.ts';
import { KafkaPublisher } from './kafka.ts';
import { WebhookPublisher } from './webhook.ts';

/**
 * The publishers every target fans out to: Kafka when brokers are configured, else the file sink
 * under `<MSGX_DATA_DIR>/events/`; plus one webhook per MSGX_FANOUT_WEBHOOKS entry.
 * Created once per cold start; close() them on shutdown.
 */
export function buildPublishers(config: Config, deps: { log?: Log; clock?: Clock } = {}): Publisher[] {
  const list: Publisher[] = [];
  if (config.kafka.brokers.length === 0 && config.runtime === 'lambda')
    throw new ConfigError('MSGX_KAFKA_BROKERS: required in the cloud to publish (the file sink is for the twin only)');
  if (config.kafka.brokers.length > 0) {
    list.push(new KafkaPublisher(config.kafka, { publishTimeoutMs: config.outbox.publishTimeoutMs, log: deps.log }));
  } else {
    list.push(new FileSinkPublisher({ dir: resolve(join(config.dataDir, 'events')), clock: deps.clock }));
  }
  for (const url of config.outbox.fanoutWebhooks) {
    list.push(new WebhookPublisher({ url, signingSecret: config.signingSecret, timeoutMs: config.outbox.publishTimeoutMs }));
  }
  return list;
}

export async function closePublishers(publishers: Publisher[]): Promise<void> {
  await Promise.allSettled(publishers.map((p) => p.close()));
}

/**
 * Exactly once into Kafka for the log relay (MSGX_KAFKA_EXACTLY_ONCE with brokers): the per-target
 * transactional producers the dispatcher writes Kafka through; undefined when it is off.
 */
export function buildExactlyOnce(config: Config, deps: { log?: Log } = {}): ExactlyOnceSinks | undefined {
  return config.outbox.exactlyOnce ? new ExactlyOnceSinks(config, deps) : undefined;
}
