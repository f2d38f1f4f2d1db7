import kafkajs from 'kafkajs';
import type { ProducerConfig, RecordMetadata } from 'kafkajs';

const { Partitioners } = kafkajs;

/**
 * Where each message of one send landed. kafkajs groups a send's messages per partition in their
 * order, and the broker answers the base offset of each partition's batch: a message's offset is
 * that base plus its position among the send's messages of its partition. `partitionOf` holds the
 * partition the producer's partitioner chose for each message object.
 */
export function placements(
  messages: object[],
  partitionOf: WeakMap<object, number>,
  meta: RecordMetadata[],
): { partition?: number; offset?: number }[] {
  const base = new Map<number, number>();
  for (const m of meta) base.set(m.partition, Number(m.baseOffset ?? m.offset ?? -1));
  const seen = new Map<number, number>();
  return messages.map((m) => {
    const partition = partitionOf.get(m);
    if (partition === undefined) return {};
    const i = seen.get(partition) ?? 0;
    seen.set(partition, i + 1);
    const b = base.get(partition);
    return { partition, offset: b === undefined || b < 0 ? undefined : b + i };
  });
}

/**
 * A partitioner factory that is kafkajs's default and remembers, in `into`, the partition it chose
 * for each message object (for `placements`), and in `counts` how many partitions the topic had then.
 */
export function recordingPartitioner(into: WeakMap<object, number>, counts?: WeakMap<object, number>): ProducerConfig['createPartitioner'] {
  return () => {
    const inner = Partitioners.DefaultPartitioner();
    return (args) => {
      const p = inner(args);
      into.set(args.message, p);
      counts?.set(args.message, args.partitionMetadata.length);
      return p;
    };
  };
}
