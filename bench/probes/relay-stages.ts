/**
 * Where one event's relay time goes (bench/README.md *latency*): single events committed one at a
 * time to the `msg` target, each relayed at once by dispatchOnce (no wake-up), exactly once into a
 * real Kafka and at least once, timed until a read_committed consumer reads it. Prints the medians
 * of the round's own stages (discovery, read, publish, finish) and the consumer's read.
 *
 *   npx tsx bench/probes/relay-stages.ts [events=200]
 */
import { loadConfig } from '../../lib/config/config.ts';
import { dispatchOnce } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { ExactlyOnceSinks } from '../../lib/outbox/exactlyOnce.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import { freshPg, serviceUrls } from '../lib/env.ts';
import { latency, sleep } from '../lib/stats.ts';
import { watchTopic } from '../lib/topicWatch.ts';
import { createTopics, randomTopic } from '../../test/helpers/kafka.ts';

const T = Number(process.argv[2] ?? 200);
const brokers = serviceUrls().kafkaBrokers;

for (const exactlyOnce of [true, false]) {
  const pg = await freshPg();
  const topic = randomTopic('probe.stages.msg');
  const offsets = randomTopic('probe.stages.offsets');
  await createTopics(brokers, [
    { topic, numPartitions: 3 },
    { topic: offsets, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] },
  ]);
  const config = loadConfig({
    MSGX_KAFKA_BROKERS: brokers.join(','),
    MSGX_TOPIC_MSG: topic,
    MSGX_TOPIC_OFFSETS: offsets,
    MSGX_KAFKA_EXACTLY_ONCE: String(exactlyOnce),
    MSGX_LOG_LEVEL: 'SILENT',
  });
  const ctx = { db: pg.db, config, clock: systemClock, log: silentLog };
  const kafka = new KafkaPublisher(config.kafka, { publishTimeoutMs: 10_000 });
  const sinks = exactlyOnce ? new ExactlyOnceSinks(config, { log: silentLog }) : undefined;
  const watch = await watchTopic(topic);
  const stages: Record<string, number[]> = { discover: [], read: [], publish: [], finish: [], round: [], consumer: [] };
  try {
    for (let i = -20; i < T; i++) {
      const [id] = await pg.db.tx((tx) =>
        enqueueEvents(tx, [{ target: 'msg', key: `k${i % 7}`, type: 'T', value: { source: { msgId: i } } }]),
      );
      const t0 = performance.now();
      const r = await dispatchOnce(ctx, [kafka], { exactlyOnce: sinks, targets: ['msg'] });
      const t1 = performance.now();
      while (!watch.firstSeen.has(i)) await sleep(0.2);
      if (i < 0) continue; // warm-up: producers, metadata, the cursor
      const t = r.targets[0]!;
      stages.discover!.push(r.discoverMs);
      stages.read!.push(t.claimMs);
      stages.publish!.push(Object.values(t.publishMs).reduce((a, b) => a + b, 0));
      stages.finish!.push(t.markMs);
      stages.round!.push(t1 - t0);
      stages.consumer!.push(watch.firstSeen.get(i)! - t1);
      void id;
      await sleep(10);
    }
    console.log(
      `${exactlyOnce ? 'exactly once ' : 'at least once'}: ` +
        Object.entries(stages)
          .map(([k, v]) => `${k} ${latency(v).p50.toFixed(2)}`)
          .join(', ') +
        ' (ms, p50)',
    );
  } finally {
    await watch.stop();
    await kafka.close();
    await sinks?.close();
    await pg.drop();
  }
}
process.exit(0);
