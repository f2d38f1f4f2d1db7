import type { Queryable } from '../db/db.ts';
import type { EventSummary } from './types.ts';

/**
 * The events a source produced (an inbound message, a transactional message), each with its
 * per-publisher outcomes and Kafka partition/offset: what the trace and the console show. The log
 * relay's outcomes come from outbox_batch (msgx_event_deliveries, migration 016), one per batch that
 * took the event, so a record sent twice (at least once) shows twice.
 */

const iso = (d: Date | string | null | undefined): string | null => (d ? new Date(d).toISOString() : null);

export interface EventDeliveryView {
  publisher: string;
  outcome: 'ok' | 'failed';
  partition: number | null;
  offset: string | null;
  tries: number;
  at: string;
  error: string | null;
}

export interface TraceEventView extends EventSummary {
  status: string;
  createdAt: string;
  sentAt: string | null;
  deadAt: string | null;
  deliveries: EventDeliveryView[];
}

/** Events a source produced (an inbound message, a transactional message), each with its publisher outcomes. */
export async function eventsBySource(
  db: Queryable,
  sourceKind: string,
  sourceId: string,
): Promise<(TraceEventView & { value: Record<string, unknown> | null })[]> {
  const r = await db.query<Record<string, unknown>>(
    // The state as every reader derives it (msgx_event_state, migration 014); a failure's count and text
    // live on the event (per-event path) or in its exception (log relay).
    `SELECT e.event_id, e.target, e.event_type, e.partition_key, e.flid, e.state_version,
            msgx_event_state(e.status, e.target, e.event_id, e.writer_xid, now()) AS status,
            coalesce(x.attempts, e.attempts) AS attempts, coalesce(x.last_error, e.last_error) AS last_error,
            e.created_at, e.sent_at, coalesce(e.dead_at, CASE WHEN x.dead THEN x.updated_at END) AS dead_at, e.sent_as,
            CASE WHEN e.target = 'msg' THEN e.value END AS value,
            coalesce(d.deliveries, '[]'::json) AS deliveries, d.last_at, c.carrier, c.carried_at
     FROM msg_event e LEFT JOIN outbox_exception x ON x.target = e.target AND x.event_id = e.event_id
     -- What the per-event relay wrote (event_delivery), then what the log relay's batches took (outbox_batch).
     LEFT JOIN LATERAL (
       SELECT json_agg(json_build_object('publisher', o.publisher, 'outcome', o.outcome, 'partition', o.partition,
                                         'offset', o."offset"::text, 'tries', o.tries, 'at', o.at, 'error', o.error)
                       ORDER BY o.at, o.publisher) AS deliveries,
              max(o.at) FILTER (WHERE o.logged) AS last_at
       FROM (SELECT dv.publisher, dv.outcome, dv.partition, dv."offset", dv.tries, dv.at, dv.error, false AS logged
             FROM event_delivery dv WHERE dv.event_id = e.event_id
             UNION ALL
             SELECT b.publisher, 'ok', b.partition, b."offset", b.tries, b.sent_at, NULL, true
             FROM msgx_event_deliveries(e.target, e.event_id) b) o) d ON true
     -- An older schd version no publisher took: it went out as the newest version of its flight in
     -- the same flush (docs/outbox.md "Delivery"), the first later event of the flight that was taken.
     LEFT JOIN LATERAL (
       SELECT n.event_id AS carrier, (SELECT min(b.sent_at) FROM msgx_event_deliveries(n.target, n.event_id) b) AS carried_at
       FROM msg_event n
       WHERE e.target = 'schd' AND d.last_at IS NULL AND n.target = 'schd' AND n.event_id > e.event_id
         AND coalesce(n.flid, n.partition_key) = coalesce(e.flid, e.partition_key)
         AND EXISTS (SELECT 1 FROM msgx_event_deliveries(n.target, n.event_id))
       ORDER BY n.event_id LIMIT 1) c ON true
     WHERE e.source_kind = $1 AND e.source_id = $2 ORDER BY e.event_id`,
    [sourceKind, sourceId],
  );
  return r.rows.map((x) => {
    const deliveries = (typeof x.deliveries === 'string' ? JSON.parse(x.deliveries) : x.deliveries) as Record<string, unknown>[];
    let value: Record<string, unknown> | null = null;
    if (typeof x.value === 'string') {
      try {
        value = JSON.parse(x.value) as Record<string, unknown>;
      } catch {
        value = null;
      }
    }
    return {
      eventId: Number(x.event_id),
      target: x.target as string,
      type: x.event_type as string,
      key: (x.partition_key as string | null) ?? null,
      flid: (x.flid as string | null) ?? null,
      stateVersion: x.state_version === null || x.state_version === undefined ? null : Number(x.state_version),
      status: x.status as string,
      attempts: Number(x.attempts),
      lastError: (x.last_error as string | null) ?? null,
      createdAt: iso(x.created_at as Date)!,
      // The log relay does not write sent_at: a SENT event went when its last publisher took it.
      sentAt: iso((x.sent_at ?? (x.status === 'SENT' ? (x.last_at ?? x.carried_at) : null)) as Date),
      deadAt: iso(x.dead_at as Date),
      sentAs: (x.sent_as ?? x.carrier) ? Number(x.sent_as ?? x.carrier) : null,
      value,
      deliveries: deliveries.map((d) => ({
        publisher: String(d.publisher),
        outcome: d.outcome as 'ok' | 'failed',
        partition: d.partition === null || d.partition === undefined ? null : Number(d.partition),
        offset: d.offset === null || d.offset === undefined ? null : String(d.offset),
        tries: Number(d.tries),
        at: iso(d.at as string)!,
        error: (d.error as string | null) ?? null,
      })),
    };
  });
}
