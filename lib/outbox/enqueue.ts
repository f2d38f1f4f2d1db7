import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';

/**
 * An event for the relay. Written inside the caller's own transaction, so the event exists if and
 * only if the business change committed (docs/outbox.md "Enqueueing from another service").
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
export async function enqueueEvents(client: Queryable, events: NewEvent[], options: { now?: Date } = {}): Promise<number[]> {
  if (events.length === 0) return [];
  const now = options.now ?? new Date();
  // One JSON document for the whole batch: PostgreSQL parses it in C, where text[] parameters
  // would be escaped element by element on both sides (the values are big JSON texts). The
  // NOTIFY rides in the same statement (delivered at commit): one round trip per batch.
  const rows = events.map((e) => ({
    target: e.target,
    key: e.key ?? null,
    type: e.type,
    // A value that is not text rides inside the parameter as JSON and is stored as that JSON's
    // text (the same bytes JSON.stringify gives), so it is neither encoded twice nor escaped.
    vj: e.value === null || e.value === undefined || typeof e.value === 'string' ? null : e.value,
    vt: typeof e.value === 'string' ? e.value : null,
    headers: e.headers ?? {},
    flid: e.flid ?? null,
    version: e.stateVersion ?? null,
    skind: e.sourceKind ?? 'external',
    sid: e.sourceId ?? null,
  }));
  const r = await client.query<{ event_id: number }>(
    prepared(`WITH ins AS (
       INSERT INTO msg_event (target, partition_key, event_type, value, headers, flid, state_version,
                              source_kind, source_id, next_attempt_at, created_at)
       SELECT t.target, t.key, t.type, coalesce(t.vj::text, t.vt), t.headers, t.flid, t.version, t.skind, t.sid, $2, $2
       FROM ROWS FROM (json_to_recordset($1::json)
              AS (target text, key text, type text, vj json, vt text, headers jsonb, flid text, version int, skind text, sid text))
            WITH ORDINALITY AS t(target, key, type, vj, vt, headers, flid, version, skind, sid, ord)
       ORDER BY t.ord
       RETURNING event_id),
     wake AS (SELECT pg_notify($3, ''))
     SELECT event_id FROM ins, wake`),
    [JSON.stringify(rows), now, OUTBOX_CHANNEL],
  );
  return r.rows.map((row) => row.event_id).sort((a, b) => a - b);
}
