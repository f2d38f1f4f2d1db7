import type { HealthCheck } from '../http/health.ts';
import type { AppContext } from '../app/context.ts';
import { describeMissing, missingTopics } from './missingTopics.ts';

/**
 * `GET /health`'s Kafka checks when brokers are configured (none for the file sink): the cluster
 * answers a metadata request, and every topic msgx must write exists (MSGX_TX_TOPICS and the
 * topic of every target with open events). One admin client per process, connected on first use.
 * kafkajs is imported then too: the ingress needs it for nothing else, and a cold start without it
 * compiles ~280 kB less.
 */
export function kafkaHealth(ctx: Pick<AppContext, 'config' | 'db'>): Record<string, HealthCheck> {
  const { config } = ctx;
  if (config.kafka.brokers.length === 0) return {};
  let connected: Promise<{ describeCluster(): Promise<unknown> }> | undefined;
  return {
    kafka: async () => {
      connected ??= (async () => {
        const { createKafka } = await import('./kafkaClient.ts');
        const admin = createKafka(config.kafka, { clientId: 'msgx-health' }).admin();
        await admin.connect();
        return admin;
      })().catch((err: unknown) => {
        connected = undefined;
        throw err;
      });
      await (await connected).describeCluster();
    },
    'kafka-topics': async () => {
      const missing = await missingTopics(config, ctx.db);
      if (missing.length) throw new Error(`missing on the cluster: ${describeMissing(missing)}`);
    },
  };
}
