import type { Config } from '../config/config.ts';
import type { HealthCheck } from '../http/health.ts';
import { createKafka } from './kafkaClient.ts';

/**
 * `GET /health`'s Kafka check when brokers are configured (none for the file sink): the cluster
 * answers a metadata request. One admin client per process, connected on first use.
 */
export function kafkaHealth(config: Pick<Config, 'kafka'>): Record<string, HealthCheck> {
  if (config.kafka.brokers.length === 0) return {};
  const admin = createKafka(config.kafka, { clientId: 'msgx-health' }).admin();
  let connected: Promise<void> | undefined;
  return {
    kafka: async () => {
      connected ??= admin.connect().catch((err) => {
        connected = undefined;
        throw err;
      });
      await connected;
      await admin.describeCluster();
    },
  };
}
