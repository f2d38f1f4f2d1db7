import type { Queryable } from '../db/db.ts';
import type { EventSummary } from './types.ts';

/** Query functions for /admin/stats, /admin/dead?kind=event, the console and the alarms' gauges. */

export interface DeadEvent extends EventSummary {
  sourceKind: string | null;
  sourceId: string | null;
  createdAt: Date;
  deadAt: Date | null;
}

export interface DeadFilter {
  target?: string;
  /** Page: event_ids above this one. */
  afterId?: number;
  limit?: number;
}

export async function deadEvents(db: Queryable, filter: DeadFilter = {}): Promise<DeadEvent[]> {
  const r = await db.query<Record<string, unknown>>(
    // Dead as msgx_outbox_dead says (migration 014): marked so per event, or given up by the log relay.
    `SELECT e.event_id, e.target, e.event_type, e.partition_key, e.flid, e.state_version, d.attempts, d.last_error,
            e.source_kind, e.source_id, e.created_at, d.dead_at, e.sent_as
     FROM msgx_outbox_dead() d JOIN msg_event e ON e.event_id = d.event_id
     WHERE ($1::text IS NULL OR d.target = $1) AND d.event_id > $2
     ORDER BY d.event_id LIMIT $3`,
    [filter.target ?? null, filter.afterId ?? 0, Math.min(Math.max(1, filter.limit ?? 100), 1000)],
  );
  return r.rows.map((x) => ({
    eventId: Number(x.event_id),
    target: x.target as string,
    type: x.event_type as string,
    key: (x.partition_key as string | null) ?? null,
    flid: (x.flid as string | null) ?? null,
    stateVersion: (x.state_version as number | null) ?? null,
    attempts: x.attempts as number,
    lastError: (x.last_error as string | null) ?? null,
    sourceKind: (x.source_kind as string | null) ?? null,
    sourceId: (x.source_id as string | null) ?? null,
    createdAt: new Date(x.created_at as string),
    deadAt: x.dead_at ? new Date(x.dead_at as string) : null,
    sentAs: x.sent_as === null || x.sent_as === undefined ? null : Number(x.sent_as),
  }));
}

export interface TargetBacklog {
  target: string;
  pending: number;
  delivering: number;
  /** The head: the lowest open event_id, and how long the oldest open event has waited. */
  headEventId: number;
  headAttempts: number;
  headNextAttemptAt: Date;
  oldestCreatedAt: Date;
  oldestAgeSeconds: number;
  dead: number;
  /** The head's last error (an outage's reason, or why its last attempt failed); null if none. */
  headLastError: string | null;
  /** Since when the head is held by an outage of the whole destination (no attempt spent); null if not. */
  stalledSince: Date | null;
  stalledSeconds: number | null;
}

/** Open events per target (count, head, age of the oldest) plus the dead count of each target. */
export async function pendingByTarget(db: Queryable, now: Date): Promise<TargetBacklog[]> {
  const r = await db.query<Record<string, unknown>>(
    // Open events and their states as msgx_outbox_open derives them (migration 014).
    `WITH ev AS MATERIALIZED (SELECT * FROM msgx_outbox_open($1))
     SELECT o.target, o.pending, o.delivering, o.oldest, h.event_id AS head_id, h.attempts AS head_attempts,
            h.next_attempt_at AS head_next, h.last_error AS head_error, h.stalled_since,
            (SELECT count(*) FROM msgx_outbox_dead() d WHERE d.target = o.target) AS dead
     FROM (SELECT target,
                  count(*) FILTER (WHERE state = 'PENDING') AS pending,
                  count(*) FILTER (WHERE state = 'DELIVERING') AS delivering,
                  min(created_at) AS oldest
           FROM ev GROUP BY target) o
     CROSS JOIN LATERAL (SELECT event_id, attempts, next_attempt_at, last_error, stalled_since FROM ev
                         WHERE ev.target = o.target ORDER BY event_id LIMIT 1) h
     ORDER BY o.target`,
    [now],
  );
  return r.rows.map((x) => {
    const oldest = new Date(x.oldest as string);
    const stalled = x.stalled_since ? new Date(x.stalled_since as string) : null;
    return {
      target: x.target as string,
      pending: Number(x.pending),
      delivering: Number(x.delivering),
      headEventId: Number(x.head_id),
      headAttempts: Number(x.head_attempts),
      headNextAttemptAt: new Date(x.head_next as string),
      oldestCreatedAt: oldest,
      oldestAgeSeconds: Math.max(0, Math.round((now.getTime() - oldest.getTime()) / 1000)),
      dead: Number(x.dead),
      headLastError: (x.head_error as string | null) ?? null,
      stalledSince: stalled,
      stalledSeconds: stalled ? Math.max(0, Math.round((now.getTime() - stalled.getTime()) / 1000)) : null,
    };
  });
}

/**
 * Dead events per target, every target that has any — also those with nothing open, which
 * `pendingByTarget` (open events only) does not list. Reads the dead partial index.
 */
export async function deadEventsByTarget(db: Queryable): Promise<Record<string, number>> {
  const r = await db.query<{ target: string; dead: string }>(
    `SELECT target, count(*) AS dead FROM msgx_outbox_dead() GROUP BY target ORDER BY target`,
  );
  return Object.fromEntries(r.rows.map((x) => [x.target, Number(x.dead)]));
}

/** Events that went DEAD after `since`, and the age of the oldest open (PENDING/DELIVERING) event (0 when none). */
export async function eventGauges(q: Queryable, now: Date, since: Date): Promise<{ deadSince: number; oldestOpenSeconds: number }> {
  const r = await q.query<{ dead_event: number; oldest_event: number | null }>(
    `SELECT
       (SELECT count(*) FROM msgx_outbox_dead() WHERE dead_at > $2)::int AS dead_event,
       (SELECT extract(epoch FROM $1 - min(created_at)) FROM msgx_outbox_open($1))::float8 AS oldest_event`,
    [now, since],
  );
  const row = r.rows[0]!;
  return { deadSince: row.dead_event, oldestOpenSeconds: Math.max(0, row.oldest_event ?? 0) };
}

/** The last error the relay wrote on one event (null if none; undefined if there is no such event). */
export async function eventLastError(q: Queryable, eventId: number): Promise<string | null | undefined> {
  const r = await q.query<{ last_error: string | null }>(
    `SELECT coalesce(x.last_error, e.last_error) AS last_error
     FROM msg_event e LEFT JOIN outbox_exception x ON x.target = e.target AND x.event_id = e.event_id WHERE e.event_id = $1`,
    [eventId],
  );
  return r.rows[0]?.last_error;
}
