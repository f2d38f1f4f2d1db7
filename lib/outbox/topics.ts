import kafkajs from 'kafkajs';
import type { Config } from '../config/config.ts';
import type { Log } from '../observability/logger.ts';
import { createKafka } from './kafkaClient.ts';
import { ConfigError } from '../shared/errors.ts';

const { ConfigResourceTypes } = kafkajs;

/**
 * The offsets topic (exactly once) holds one record per batch and target, and a start that cannot
 * keep PostgreSQL's cursor reads it from the beginning (readKafkaCursor). Compaction never touches
 * the active segment, so with Kafka's default segment.ms (7 days) a start read every cursor record
 * of the last week: 6,760 records of a shared local topic took the twin's thread 326 ms of kafkajs
 * decoding (the gate bench's /health worst answer), at 10 batches a second a week would be millions.
 * Short segments and an eager cleaner keep it near one record per target plus at most ten minutes.
 */
const OFFSETS_TOPIC_CONFIG = [
  { name: 'cleanup.policy', value: 'compact' },
  { name: 'segment.ms', value: String(10 * 60_000) },
  { name: 'segment.bytes', value: String(1024 * 1024) },
  { name: 'min.cleanable.dirty.ratio', value: '0.1' },
];
/** An existing offsets topic whose segments live longer than this is reported: its reads at start grow with them. */
const OFFSETS_SEGMENT_MS_WARN = 60 * 60_000;

export interface EnsureTopicsResult {
  /** True when no brokers are configured: the file sink needs no topics. */
  fileSink: boolean;
  created: string[];
  existing: string[];
  /** Problems with topics that already existed (e.g. schd not compacted); not fixed here. */
  warnings: string[];
}

/**
 * Creates msgx.msg and msgx.schd (compacted) with MSGX_TOPIC_PARTITIONS partitions, the offsets
 * topic (exactly once: compacted, short segments), plus `extraTopics` (plain), when missing.
 * Idempotent: existing topics are left as they are; a schd or offsets topic that is not compacted,
 * or an offsets topic with long segments, is reported, never silently altered.
 */
export async function ensureTopics(
  config: Pick<Config, 'kafka' | 'outbox'> & Partial<Pick<Config, 'runtime'>>,
  extraTopics: string[] = [],
  deps: { log?: Log } = {},
): Promise<EnsureTopicsResult> {
  const result: EnsureTopicsResult = { fileSink: false, created: [], existing: [], warnings: [] };
  if (config.kafka.brokers.length === 0) {
    if (config.runtime === 'lambda')
      throw new ConfigError('MSGX_KAFKA_BROKERS: required in the cloud to create the topics (the file sink is for the twin only)');
    return { ...result, fileSink: true };
  }
  const { topicMsg, topicSchd, topicPartitions } = config.outbox;
  const compact = [{ name: 'cleanup.policy', value: 'compact' }];
  const wanted = new Map<string, { configEntries: { name: string; value: string }[] }>();
  wanted.set(topicMsg, { configEntries: [] });
  wanted.set(topicSchd, { configEntries: compact });
  // Exactly once: the targets' cursors, the latest per target.
  const offsetsTopic = config.outbox.exactlyOnce ? config.outbox.topicOffsets : null;
  if (offsetsTopic) wanted.set(offsetsTopic, { configEntries: OFFSETS_TOPIC_CONFIG });
  for (const t of extraTopics) if (!wanted.has(t)) wanted.set(t, { configEntries: [] });

  const admin = createKafka(config.kafka, { clientId: 'msgx-admin', log: deps.log }).admin();
  await admin.connect();
  try {
    const present = new Set(await admin.listTopics());
    const missing = [...wanted].filter(([t]) => !present.has(t));
    result.existing = [...wanted.keys()].filter((t) => present.has(t));
    if (missing.length > 0) {
      await createTopicsWithLeaders(
        admin,
        missing.map(([topic, o]) => ({
          topic,
          numPartitions: topicPartitions,
          configEntries: o.configEntries,
        })),
      );
      // Another starter may have created some meanwhile: createTopics then answers false, fine.
      result.created = missing.map(([t]) => t);
    }
    // The compacted topics that existed already, in one describe: not compacted, or (offsets) long segments.
    const compacted = [topicSchd, ...(offsetsTopic ? [offsetsTopic] : [])].filter((t) => present.has(t));
    if (compacted.length > 0) {
      const d = await admin.describeConfigs({
        includeSynonyms: false,
        resources: compacted.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['cleanup.policy', 'segment.ms'] })),
      });
      for (const r of d.resources) {
        const value = (name: string) => r.configEntries.find((e) => e.configName === name)?.configValue;
        const policy = value('cleanup.policy');
        if (policy && !policy.split(',').includes('compact'))
          result.warnings.push(`${r.resourceName}: cleanup.policy is ${policy}, expected compact`);
        const segmentMs = Number(value('segment.ms'));
        if (r.resourceName === offsetsTopic && segmentMs > OFFSETS_SEGMENT_MS_WARN)
          result.warnings.push(
            `${offsetsTopic}: segment.ms is ${segmentMs}; a start that reads its cursors reads every record of the active segment — set segment.ms=${OFFSETS_TOPIC_CONFIG[1]!.value} (kafka-configs --alter --entity-type topics --entity-name ${offsetsTopic} --add-config segment.ms=${OFFSETS_TOPIC_CONFIG[1]!.value})`,
          );
      }
    }
  } finally {
    await admin.disconnect().catch(() => {});
  }
  for (const w of result.warnings) deps.log?.warn({ message: 'outbox_topic_warning', warning: w });
  return result;
}

type Admin = ReturnType<ReturnType<typeof createKafka>['admin']>;
type TopicSpec = Parameters<Admin['createTopics']>[0]['topics'][number];

/** Metadata errors a topic shows for a moment after its creation (KRaft propagates it asynchronously). */
const SETTLING = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE', 'NOT_LEADER_FOR_PARTITION']);

/**
 * Creates `topics` and returns once every partition has a leader. kafkajs's own `waitForLeaders`
 * retries only LEADER_NOT_AVAILABLE, but a broker may first answer UNKNOWN_TOPIC_OR_PARTITION for a
 * topic it has just created; that surfaced as a failed start (and a red test) on a busy machine.
 * Resolves false when every topic already existed.
 */
export async function createTopicsWithLeaders(admin: Admin, topics: TopicSpec[], options: { timeoutMs?: number } = {}): Promise<boolean> {
  const created = await admin.createTopics({ waitForLeaders: false, topics });
  const names = topics.map((t) => t.topic);
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  for (;;) {
    try {
      const md = await admin.fetchTopicMetadata({ topics: names });
      if (md.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))) return created;
    } catch (e) {
      const err = e as { type?: string; originalError?: { type?: string } };
      if (!SETTLING.has(err.type ?? err.originalError?.type ?? '')) throw e;
      if (Date.now() >= deadline) throw e;
    }
    if (Date.now() >= deadline)
      throw new Error(`Kafka topics ${names.join(', ')}: no leader for every partition after ${options.timeoutMs ?? 30_000} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
