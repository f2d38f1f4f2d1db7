import type { Queryable } from '../db/db.ts';
import { enqueueEvents } from '../outbox/enqueue.ts';
import type { TxPatch, TxRow } from './store.ts';
import { appendTrace } from './trace.ts';

export const TXMSG_ID_HEADER = 'msgx-txmsg-id';
export const TXMSG_EVENT_TYPE = 'TX_MESSAGE';

/**
 * The columns that start a delivery schedule afresh (commit, resend): the first delivery is
 * enqueued now when the schedule's first wait is zero, else redeliver.ts enqueues it when due.
 */
export async function startSchedule(tx: Queryable, row: TxRow, now: Date, scheduleMs: number[]): Promise<TxPatch> {
  const fresh: TxPatch = { attempts: 0, in_flight_event_id: null, redeliver_after_ms: null, delivered_at: null };
  const first = scheduleMs[0] ?? 0;
  if (first > 0) return { ...fresh, next_delivery_at: new Date(now.getTime() + first) };
  return { ...fresh, ...(await enqueueDelivery(tx, { ...row, attempts: 0 }, now, scheduleMs)) };
}

/**
 * Hands delivery number `row.attempts + 1` to the outbox relay, in the caller's transaction, so the
 * delivery exists if and only if the state change that asked for it commits. The wait before the
 * following one is snapshotted on the row so the relay's SENT hook needs no configuration; after
 * the last delivery the last wait is the ack window before the message is declared DEAD.
 */
export async function enqueueDelivery(tx: Queryable, row: TxRow, now: Date, scheduleMs: number[]): Promise<TxPatch> {
  const index = row.attempts;
  const [eventId] = await enqueueEvents(
    tx,
    [
      {
        target: `tx:${row.topic}`,
        key: row.msg_key,
        type: TXMSG_EVENT_TYPE,
        value: row.payload,
        // Ours last: a producer cannot forge the id the consumer acks with.
        headers: { ...row.headers, [TXMSG_ID_HEADER]: row.id },
        sourceKind: 'txmsg',
        sourceId: row.id,
      },
    ],
    { now },
  );
  const wait = scheduleMs[index + 1] ?? scheduleMs[scheduleMs.length - 1] ?? 0;
  await appendTrace(tx, row.id, now, 'enqueue', null, { eventId, delivery: index + 1, of: scheduleMs.length });
  return { attempts: index + 1, in_flight_event_id: eventId!, redeliver_after_ms: wait, next_delivery_at: null };
}
