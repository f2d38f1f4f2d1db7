import type { Queryable } from '../db/db.ts';

/**
 * An event for the relay. Written inside the caller's own transaction, so the event exists if and
 * only if the business change committed (seed 001: the room service's outbox).
 */
export interface NewEvent {
  /** Delivery target: 'msg', 'schd', or 'tx:<topic>'. Order is kept per target. */
  target: string;
  /** Kafka key (FLID for flight events); null for none. */
  key?: string | null;
  /** Event type, sent as header msgx-event-type. */
  type: string;
  /** The record value: an object is sent as JSON, a string as is, null is a tombstone. */
  value: unknown;
  headers?: Record<string, string>;
  flid?: string;
  stateVersion?: number;
  sourceKind?: 'proc' | 'txmsg' | 'external';
  sourceId?: string;
}

export const OUTBOX_CHANNEL = 'msgx_outbox';

/** Inserts the events in order and wakes the dispatcher on commit; returns their event IDs. */
export async function enqueueEvents(
  client: Queryable,
  events: NewEvent[],
  options: { now?: Date } = {},
): Promise<number[]> {
  if (events.length === 0) return [];
  const now = options.now ?? new Date();
  // The NOTIFY rides in the same statement (delivered at commit): one round trip per batch.
  const r = await client.query<{ event_id: number }>(
    `WITH ins AS (
       INSERT INTO msg_event (target, partition_key, event_type, value, headers, flid, state_version,
                              source_kind, source_id, next_attempt_at, created_at)
       SELECT t.target, t.key, t.type, t.value, t.headers::jsonb, t.flid, t.version, t.skind, t.sid, $10, $10
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::text[])
            WITH ORDINALITY AS t(target, key, type, value, headers, flid, version, skind, sid, ord)
       ORDER BY t.ord
       RETURNING event_id),
     wake AS (SELECT pg_notify($11, ''))
     SELECT event_id FROM ins, wake`,
    [
      events.map((e) => e.target),
      events.map((e) => e.key ?? null),
      events.map((e) => e.type),
      events.map((e) => (e.value === null || e.value === undefined ? null : typeof e.value === 'string' ? e.value : JSON.stringify(e.value))),
      events.map((e) => JSON.stringify(e.headers ?? {})),
      events.map((e) => e.flid ?? null),
      events.map((e) => e.stateVersion ?? null),
      events.map((e) => e.sourceKind ?? 'external'),
      events.map((e) => e.sourceId ?? null),
      now,
      OUTBOX_CHANNEL,
    ],
  );
  return r.rows.map((row) => row.event_id).sort((a, b) => a - b);
}
