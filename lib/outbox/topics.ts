import kafkajs from 'kafkajs';
import type { Config } from '../config/config.ts';
import type { Log } from '../observability/logger.ts';
import { createKafka } from './kafkaClient.ts';
import { ConfigError } from '../shared/errors.ts';

const { ConfigResourceTypes } = kafkajs;

export interface EnsureTopicsResult {
  /** True when no brokers are configured: the file sink needs no topics. */
  fileSink: boolean;
  created: string[];
  existing: string[];
  /** Problems with topics that already existed (e.g. schd not compacted); not fixed here. */
  warnings: string[];
}

/**
 * Creates msgx.msg and msgx.schd (compacted) with MSGX_TOPIC_PARTITIONS partitions, plus
 * `extraTopics` (plain), when missing. Idempotent: existing topics are left as they are, and a
 * schd topic that is not compacted is reported, never silently altered.
 */
export async function ensureTopics(
  config: Pick<Config, 'kafka' | 'outbox'> & Partial<Pick<Config, 'runtime'>>,
  extraTopics: string[] = [],
  deps: { log?: Log } = {},
): Promise<EnsureTopicsResult> {
  const result: EnsureTopicsResult = { fileSink: false, created: [], existing: [], warnings: [] };
  if (config.kafka.brokers.length === 0) {
    if (config.runtime === 'lambda') throw new ConfigError('MSGX_KAFKA_BROKERS: required in the cloud to create the topics (the file sink is for the twin only)');
    return { ...result, fileSink: true };
  }
  const { topicMsg, topicSchd, topicPartitions } = config.outbox;
  const wanted = new Map<string, { compact: boolean }>();
  wanted.set(topicMsg, { compact: false });
  wanted.set(topicSchd, { compact: true });
  for (const t of extraTopics) if (!wanted.has(t)) wanted.set(t, { compact: false });

  const admin = createKafka(config.kafka, { clientId: 'msgx-admin', log: deps.log }).admin();
  await admin.connect();
  try {
    const present = new Set(await admin.listTopics());
    const missing = [...wanted].filter(([t]) => !present.has(t));
    result.existing = [...wanted.keys()].filter((t) => present.has(t));
    if (missing.length > 0) {
      await admin.createTopics({
        waitForLeaders: true,
        topics: missing.map(([topic, o]) => ({
          topic,
          numPartitions: topicPartitions,
          configEntries: o.compact ? [{ name: 'cleanup.policy', value: 'compact' }] : [],
        })),
      });
      // Another starter may have created some meanwhile: createTopics then answers false, fine.
      result.created = missing.map(([t]) => t);
    }
    if (present.has(topicSchd)) {
      const d = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topicSchd, configNames: ['cleanup.policy'] }],
      });
      const policy = d.resources[0]?.configEntries.find((e) => e.configName === 'cleanup.policy')?.configValue;
      if (policy && !policy.split(',').includes('compact'))
        result.warnings.push(`${topicSchd}: cleanup.policy is ${policy}, expected compact`);
    }
  } finally {
    await admin.disconnect().catch(() => {});
  }
  for (const w of result.warnings) deps.log?.warn({ message: 'outbox_topic_warning', warning: w });
  return result;
}
