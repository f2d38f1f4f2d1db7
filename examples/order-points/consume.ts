import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Kafka } from 'kafkajs';
import type { ConsumedRecord } from './points.ts';

export type Handler = (r: ConsumedRecord) => Promise<unknown>;

/**
 * Reads the twin's file sink (`.msgx/events/<topic>.jsonl`, one JSON record a line) from the
 * start, polling for new lines. A handler error is logged and the line skipped: msgx redelivers
 * anything not acknowledged, which is the point of the example.
 */
export function tailFileSink(dir: string, topic: string, handle: Handler, pollMs = 500): () => void {
  let offset = 0;
  let partial = '';
  let stopped = false;
  const file = join(dir, `${topic}.jsonl`);
  const tick = async () => {
    const fh = await open(file, 'r').catch(() => undefined);
    if (fh) {
      try {
        const { size } = await fh.stat();
        if (size > offset) {
          const buf = Buffer.alloc(size - offset);
          await fh.read(buf, 0, buf.length, offset);
          offset = size;
          const lines = (partial + buf.toString('utf8')).split('\n');
          partial = lines.pop() ?? '';
          for (const line of lines.filter(Boolean)) {
            const rec = JSON.parse(line) as ConsumedRecord;
            await handle(rec).catch((err: Error) => console.error(`points: not acked (${err.message})`));
          }
        }
      } finally {
        await fh.close();
      }
    }
    if (!stopped) setTimeout(() => void tick(), pollMs);
  };
  void tick();
  return () => {
    stopped = true;
  };
}

/** The same over Kafka (MSGX_KAFKA_BROKERS set): a consumer group on the producer's topic. */
export async function consumeKafka(brokers: string[], topic: string, handle: Handler): Promise<() => Promise<void>> {
  const consumer = new Kafka({ clientId: 'points-example', brokers }).consumer({ groupId: 'points-example' });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v ?? '')]));
      // Commit the offset either way: redelivery comes from msgx, not from re-reading Kafka.
      await handle({ value: message.value?.toString('utf8') ?? null, headers }).catch((err: Error) =>
        console.error(`points: not acked (${err.message})`),
      );
    },
  });
  return () => consumer.disconnect();
}
