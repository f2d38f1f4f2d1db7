import { prepared } from '../db/prepared.ts';
import type { ClaimedRow } from './types.ts';

// The log's cursor rows: the targets with work, the lease on one and the read of its pages.

/** The null key as a set member: events without a key are ordered among themselves. */
export const keyOf = (k: string | null): string => (k === null ? '\u0000' : k);

export interface TargetRow {
  target: string;
  has_cursor: boolean;
  open_batch: boolean;
  has_new: boolean;
  lease_owner: string | null;
  lease_until: Date | null;
  hold_until: Date | null;
  last_flush_at: Date | null;
  exception_due: Date | null;
  has_exceptions: boolean;
  created_at: Date;
}

// Targets: a loose index scan of msg_event_open (one probe per target) over the rows not settled
// before the log; per target, whether its cursor has anything new, its lease, hold and exceptions.
// Reads only.
//
// The scans by writer_xid from a cursor's xmin are bounded above as well, by a bound every row
// meets (nothing visible was written at or after the current snapshot's xmax): against a value it
// cannot see, the planner takes one open bound for a third of the table and scans msg_event in full
// for the first new event, while a range of two such bounds it takes for a sliver and walks
// msg_event_writer (with 50,000 delivered events: 15-20 ms per wake and per batch opened, against
// 0.1 ms; commit-to-ack p50 44 ms against 6 ms, bench/probes/commit-ack.ts). The batch's start
// takes min(event_id + 0) so that the planner cannot turn the min into an event_id-ordered scan of
// the primary key that filters every delivered event on its way.
export const DISCOVER_SQL = prepared(`
WITH RECURSIVE tg AS (
  (SELECT target FROM msg_event WHERE sent_at IS NULL AND dead_at IS NULL ORDER BY target LIMIT 1)
  UNION ALL
  SELECT (SELECT m.target FROM msg_event m WHERE m.sent_at IS NULL AND m.dead_at IS NULL AND m.target > tg.target
          ORDER BY m.target LIMIT 1)
  FROM tg WHERE tg.target IS NOT NULL
)
SELECT tg.target, t.snap_lo IS NOT NULL AS has_cursor, t.snap_hi IS NOT NULL AS open_batch,
       t.lease_owner, t.lease_until, t.hold_until, t.last_flush_at,
       n.created_at IS NOT NULL AS has_new, coalesce(n.created_at, now()) AS created_at,
       x.due AS exception_due, x.n > 0 AS has_exceptions
FROM tg
LEFT JOIN outbox_target t ON t.target = tg.target
LEFT JOIN LATERAL (
  SELECT m.created_at FROM msg_event m
  WHERE m.target = tg.target AND m.status = 'PENDING' AND m.sent_at IS NULL AND m.dead_at IS NULL
    AND m.writer_xid >= pg_snapshot_xmin(coalesce(t.snap_lo, msgx_outbox_origin()))
    AND m.writer_xid < pg_snapshot_xmax(pg_current_snapshot())
    AND NOT pg_visible_in_snapshot(m.writer_xid, coalesce(t.snap_lo, msgx_outbox_origin()))
  LIMIT 1) n ON true
LEFT JOIN LATERAL (
  SELECT min(next_attempt_at) AS due, count(*) AS n FROM outbox_exception e WHERE e.target = tg.target AND NOT e.dead AND NOT e.at_head) x ON true
WHERE tg.target IS NOT NULL`);

export const ENSURE_CURSOR_SQL = prepared(`INSERT INTO outbox_target (target, snap_lo) VALUES ($1, msgx_outbox_origin())
  ON CONFLICT (target) DO UPDATE SET snap_lo = coalesce(outbox_target.snap_lo, msgx_outbox_origin())`);

// A page of the open batch, shared by the read and the read ahead (each names its cursor `c`: its
// snap_lo, snap_hi and after_id): the target's events committed between the two snapshots after
// after_id, in event_id order, without those waiting behind a failed head of their key or dead; a
// failed head carries its attempts and the publishers that took it. The exception is looked up per
// event by a LATERAL probe on purpose: as NOT EXISTS the planner may, once msg_event is analyzed,
// hash-anti-join the whole window and sort it for every page (seen with the values inlined: 23-33
// ms instead of 4-6 ms for a page of 1,000 out of 20,000 with 5,000 dead exceptions), where the
// probe keeps the ordered index scan that stops at the page's end; one probe gives both the filter
// and the head's columns (it was a scalar subquery and a join, two index probes per event). The
// page's constants (its bounds, whether it is stale, the session setting) are computed once in `c`,
// not on every row: 7.1-9.5 against 5.8-6.7 µs of PostgreSQL per event (bench/probes/relay-cpu.ts).
const PAGE_COLUMNS = `e.event_id, e.partition_key, e.event_type, e.value, e.headers, e.source_kind, e.source_id,
       e.flid, e.state_version, coalesce(e.attempts, 0) AS attempts, e.delivered_to, coalesce(e.at_head, false) AS at_head`;
const PAGE_EVENTS = `LEFT JOIN LATERAL (
  SELECT m.event_id, m.partition_key, m.event_type, m.value, m.headers, m.source_kind, m.source_id, m.flid, m.state_version,
         x.attempts, array_to_string(x.delivered_to, ',') AS delivered_to, x.at_head
  FROM msg_event m
  LEFT JOIN LATERAL (SELECT x.at_head, x.attempts, x.delivered_to FROM outbox_exception x
                     WHERE x.target = $1 AND x.event_id = m.event_id LIMIT 1) x ON true
  WHERE m.target = $1 AND m.event_id > c.after_id AND m.sent_at IS NULL AND m.dead_at IS NULL AND m.status = 'PENDING'
    AND pg_visible_in_snapshot(m.writer_xid, c.snap_hi) AND NOT pg_visible_in_snapshot(m.writer_xid, c.snap_lo)
    AND x.at_head IS NOT FALSE
  ORDER BY m.event_id LIMIT $2) e ON true
ORDER BY e.event_id`;

// Lease, open (snap_hi = now unless a batch is open) and read in one statement. Opening a batch
// starts after_id just below its first possible event (the writer index finds it among the recent
// transactions), so each page reads the target's events in event_id order from there and stops at
// the page's end instead of sorting the whole window again. Neither this nor the finish waits for
// its WAL flush: a lost one only means the batch is read, and delivered, again.
export const READ_SQL = prepared(`
WITH cur AS (
  UPDATE outbox_target t SET snap_hi = coalesce(t.snap_hi, pg_current_snapshot()), lease_owner = $3, lease_until = $4,
    after_id = CASE WHEN t.snap_hi IS NOT NULL THEN t.after_id ELSE coalesce(
      (SELECT min(m.event_id + 0) - 1 FROM msg_event m
       WHERE m.writer_xid >= pg_snapshot_xmin(t.snap_lo) AND m.writer_xid < pg_snapshot_xmax(pg_current_snapshot())
         AND m.target = $1 AND m.sent_at IS NULL AND m.dead_at IS NULL),
      t.after_id) END
  WHERE t.target = $1 AND t.snap_lo IS NOT NULL AND (t.lease_owner IS NULL OR t.lease_owner = $3 OR t.lease_until <= $5)
  RETURNING t.snap_lo, t.snap_hi, t.after_id),
c AS MATERIALIZED (
  SELECT cur.*, snap_lo::text AS lo, snap_hi::text AS hi, snap_hi::text <> pg_current_snapshot()::text AS stale,
         set_config('synchronous_commit', 'off', true) AS async_commit
  FROM cur)
SELECT c.lo, c.hi, c.after_id, c.stale, ${PAGE_COLUMNS}
FROM c ${PAGE_EVENTS}`);

// The page after one not finished yet: the same read from the position the caller gives (that
// page's end, in the same open batch), writing nothing. The cursor row is not touched, so the
// finish of the page before it cannot wait on this; the lease and the batch are checked by this
// page's own finish.
export const READ_AHEAD_SQL = prepared(`
SELECT $3::text AS lo, $4::text AS hi, $5::bigint AS after_id, c.stale, ${PAGE_COLUMNS}
FROM (SELECT $3::text::pg_snapshot AS snap_lo, $4::text::pg_snapshot AS snap_hi, $5::bigint AS after_id,
             $4::text <> pg_current_snapshot()::text AS stale OFFSET 0) c ${PAGE_EVENTS}`);

export const LEASE_SQL = prepared(
  `UPDATE outbox_target SET lease_owner = $2, lease_until = $3 WHERE target = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until <= $4)`,
);
export const RELEASE_SQL = prepared(
  `UPDATE outbox_target SET lease_owner = NULL, lease_until = NULL WHERE target = $1 AND lease_owner = $2`,
);

export interface LogRow {
  event_id: string | number;
  partition_key: string | null;
  event_type: string;
  value: string | null;
  headers: Record<string, unknown> | null;
  source_kind: string | null;
  source_id: string | null;
  flid: string | null;
  state_version: number | null;
  attempts?: number;
  delivered_to?: string | null;
  at_head?: boolean;
}

/** A row of a page read (READ_SQL, READ_AHEAD_SQL): the batch's bounds on every row, an event or none. */
export type PageRow = LogRow & { lo: string; hi: string; after_id: string | number; stale: boolean };

export function toClaimed(r: LogRow, isSchd: boolean): ClaimedRow {
  const dto = r.delivered_to ? r.delivered_to.split(',').filter(Boolean) : null;
  return {
    event_id: Number(r.event_id),
    partition_key: r.partition_key,
    event_type: r.event_type,
    value: r.value,
    headers: r.headers,
    attempts: r.attempts ?? 0,
    source_kind: r.source_kind,
    source_id: r.source_id,
    delivered_to: dto,
    ...(isSchd ? { grp: r.flid ?? r.partition_key ?? `event:${r.event_id}` } : {}),
    ...(r.at_head ? { at_head: true } : {}),
  };
}
