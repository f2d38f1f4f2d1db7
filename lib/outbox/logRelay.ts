import type { Queryable } from '../db/db.ts';
import { adoptCursor, type Cursor, cursorAfter, databaseIdentity, finishBatch, openCursor, readBatch } from './commitLog.ts';
import type { TransactionalTarget } from './publishers/kafkaTransactional.ts';

/**
 * One target relayed exactly once from the log into Kafka: a batch read between two snapshots,
 * written with the cursor it ends at in one Kafka transaction, the cursor mirrored to PostgreSQL
 * after. Kafka's cursor is the truth: at start it is adopted, so a batch whose Kafka commit
 * outlived its dispatcher is not sent again.
 */
export async function startLogTarget(db: Queryable, target: string, kafkaCursor: string | null): Promise<void> {
  const refused =
    kafkaCursor === null || (await adoptCursor(db, target, JSON.parse(kafkaCursor) as Cursor, await databaseIdentity(db))) !== null;
  if (refused) await openCursor(db, target);
}

/** Relays one batch; returns how many events went out (0 when the batch was empty). */
export async function relayLogBatch(
  db: Queryable,
  sink: TransactionalTarget,
  limit: number,
  hooks: { afterKafkaCommit?: () => Promise<void> } = {},
): Promise<number> {
  const batch = await readBatch(db, sink.target, limit);
  if (batch === null) return 0;
  const records = batch.events.map((e) => ({
    key: e.key,
    value: e.value,
    headers: { ...e.headers, 'msgx-event-id': String(e.eventId), 'msgx-event-type': e.type },
  }));
  await sink.deliver(records, JSON.stringify({ ...cursorAfter(batch), db: await databaseIdentity(db) }));
  await hooks.afterKafkaCommit?.();
  await finishBatch(db, batch);
  return records.length;
}
