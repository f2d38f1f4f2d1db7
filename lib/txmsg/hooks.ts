import type { Queryable } from '../db/db.ts';
import { eventLastError } from '../outbox/queries.ts';
import { move } from './move.ts';
import { lockMessage, recordDeliveryError, updateMessage } from './store.ts';
import { appendTrace } from './trace.ts';

/** What the outbox relay reports for each event it settled (lib/outbox/dispatcher.ts). */
export interface SettledEvent {
  eventId: number;
  sourceKind: string | null;
  sourceId: string | null;
  /** The relay's last error, for events given up. */
  error?: string | null;
}

/**
 * Dispatcher `onSent` hook, called in the transaction that finishes the batch that sent the
 * events: the message's current delivery happened, so it now awaits its ack (DELIVERED) until its next delivery is due.
 * Only the delivery in flight moves the message: a SENT report for an older delivery, or for a
 * message already acknowledged (an ack may overtake this hook), is recorded in the trace only.
 */
export async function txmsgSentHook(tx: Queryable, sent: SettledEvent[], now: Date): Promise<void> {
  for (const e of ownEvents(sent)) {
    const row = await lockMessage(tx, e.sourceId!);
    if (!row) continue; // archived meanwhile: nothing left to move
    if (row.status === 'COMMITTED' && row.in_flight_event_id === e.eventId) {
      await move(
        tx,
        row,
        'sent',
        now,
        {
          in_flight_event_id: null,
          delivered_at: now,
          next_delivery_at: new Date(now.getTime() + (row.redeliver_after_ms ?? 0)),
        },
        { detail: { eventId: e.eventId, delivery: row.attempts } },
      );
    } else {
      if (row.in_flight_event_id === e.eventId)
        await updateMessage(tx, row.id, { in_flight_event_id: null, delivered_at: now, updated_at: now });
      await appendTrace(tx, row.id, now, 'sent', row.status, { eventId: e.eventId, note: 'delivery recorded, status unchanged' });
    }
  }
}

/**
 * Dispatcher `onDead` hook: the relay gave a delivery up (its own retries spent). The message
 * goes DEAD after commit, so an operator's resend delivers it again with a fresh schedule.
 */
export async function txmsgDeadHook(tx: Queryable, dead: SettledEvent[], now: Date): Promise<void> {
  for (const e of ownEvents(dead)) {
    const row = await lockMessage(tx, e.sourceId!);
    if (!row) continue;
    if (row.status === 'COMMITTED' && row.in_flight_event_id === e.eventId) {
      // The relay's hook reports no error text; it wrote it on the event in this same transaction.
      const error = e.error ?? (await eventLastError(tx, e.eventId));
      const reason = `delivery failed: ${error ?? 'the relay gave the event up'}`;
      await move(
        tx,
        row,
        'delivery-failed',
        now,
        {
          in_flight_event_id: null,
          next_delivery_at: null,
          dead_phase: 'delivery',
          dead_reason: reason,
          last_error: error ?? null,
        },
        { detail: { eventId: e.eventId, error: error ?? null } },
      );
    } else {
      await appendTrace(tx, row.id, now, 'delivery-failed', row.status, {
        eventId: e.eventId,
        error: e.error ?? null,
        note: 'status unchanged',
      });
    }
  }
}

/** Dispatcher `onRetry` hook: a delivery failed and will be retried; its error is shown on the message now. */
export async function txmsgRetryHook(tx: Queryable, retried: SettledEvent[]): Promise<void> {
  for (const e of ownEvents(retried)) if (e.error) await recordDeliveryError(tx, e.sourceId!, e.eventId, e.error);
}

/** Our events only, in id order so two hooks lock rows in the same order and cannot deadlock. */
function ownEvents(events: SettledEvent[]): SettledEvent[] {
  return events
    .filter((e) => e.sourceKind === 'txmsg' && e.sourceId)
    .sort((a, b) => (a.sourceId! < b.sourceId! ? -1 : a.sourceId! > b.sourceId! ? 1 : a.eventId - b.eventId));
}
