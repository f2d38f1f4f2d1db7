import { prepared } from '../db/prepared.ts';
import type { DeliverySettings } from './settings.ts';
import type { DispatchContext } from './types.ts';
import { round, type TargetReport } from './report.ts';

/* Finding and leasing work: which targets have open events, and the run at a target's head.
 * The claims are what the ordering argument in dispatcher.ts rests on. */

export interface HeadRow {
  target: string;
  event_id: number;
  status: string;
  lock_until: Date | null;
  next_attempt_at: Date;
  created_at: Date;
  last_flush_at: Date | null;
}

// A loose index scan over msg_event_open: one probe per target, however long the backlog is. Open
// events are found through the index's predicate (sent_at and dead_at null, migration 009) beside
// their status.
const DISCOVER_SQL = `
WITH RECURSIVE t AS (
  (SELECT target FROM msg_event WHERE status IN ('PENDING', 'DELIVERING') AND sent_at IS NULL AND dead_at IS NULL
   ORDER BY target LIMIT 1)
  UNION ALL
  SELECT (SELECT m.target FROM msg_event m
          WHERE m.status IN ('PENDING', 'DELIVERING') AND m.sent_at IS NULL AND m.dead_at IS NULL AND m.target > t.target
          ORDER BY m.target LIMIT 1)
  FROM t WHERE t.target IS NOT NULL
)
SELECT t.target, h.event_id, h.status, h.lock_until, h.next_attempt_at, h.created_at, ot.last_flush_at
FROM t
CROSS JOIN LATERAL (
  SELECT event_id, status, lock_until, next_attempt_at, created_at FROM msg_event m
  WHERE m.target = t.target AND m.status IN ('PENDING', 'DELIVERING') AND m.sent_at IS NULL AND m.dead_at IS NULL
  ORDER BY m.event_id LIMIT 1
) h
LEFT JOIN outbox_target ot ON ot.target = t.target
WHERE t.target IS NOT NULL`;

/** Every target with open events, with its head event (the lowest open event_id). */
export async function discoverHeads(ctx: DispatchContext): Promise<HeadRow[]> {
  return (await ctx.db.query<HeadRow>(DISCOVER_SQL)).rows;
}

export interface ClaimedRow {
  event_id: number;
  partition_key: string | null;
  event_type: string;
  value: string | null;
  headers: Record<string, unknown> | null;
  attempts: number;
  source_kind: string | null;
  source_id: string | null;
  delivered_to: string[] | null;
  /** schd only: the aggregation group and the event that represents it. */
  grp?: string;
  newest_id?: number;
}

// The head run of an ordinary target: msgx_outbox_claim (migration 004, as 009 left it) takes the target's
// advisory lock, then leases the open events in event_id order, cut before the first one that is
// leased by someone else or not due. A head that failed before is retried alone, so a poison
// event is isolated and innocent followers are not charged for it. One round trip.
const CLAIM_SQL = prepared(
  `SELECT locked, event_id, partition_key, event_type, value, headers, attempts, source_kind, source_id, delivered_to
   FROM msgx_outbox_claim($1, $2, $3, $4, $5, $6)`,
);

// schd: group the open events per FLID, take the newest state_version of each group whose newest
// is due and which nobody else holds, oldest groups first, at most the flush limit; lease every
// event of those groups. The period is checked and advanced in the same statement.
const CLAIM_SCHD_SQL = `
WITH flush_due AS (
  SELECT NOT EXISTS (SELECT 1 FROM outbox_target WHERE target = $1 AND last_flush_at > $6) AS ok
), open AS (
  SELECT event_id, coalesce(flid, partition_key, 'event:' || event_id) AS grp, state_version, status, lock_until
  FROM msg_event WHERE target = $1 AND status IN ('PENDING', 'DELIVERING') AND sent_at IS NULL AND dead_at IS NULL
), grp AS (
  SELECT grp, min(event_id) AS first_id,
         (array_agg(event_id ORDER BY state_version DESC NULLS LAST, event_id DESC))[1] AS newest_id,
         array_agg(event_id) AS members,
         bool_or(status = 'DELIVERING' AND lock_until > $3) AS leased
  FROM open GROUP BY grp
), pick AS (
  SELECT g.grp, g.newest_id, g.members FROM grp g JOIN msg_event n ON n.event_id = g.newest_id
  WHERE NOT g.leased AND n.next_attempt_at <= $3 AND (SELECT ok FROM flush_due)
  ORDER BY g.first_id LIMIT $2
), member AS (
  -- Each picked flight's open versions, carried in its group: the update below then finds each by
  -- primary key, whatever the planner believes about the sizes (joining the open rows to the picked
  -- groups by FLID went quadratic on a fresh table: 10,000 × 500 comparisons, 2 s per flush).
  SELECT unnest(p.members) AS event_id, p.grp, p.newest_id FROM pick p
), claimed AS (
  UPDATE msg_event e SET status = 'DELIVERING', lock_until = $4, locked_by = $5
  FROM member m
  WHERE e.event_id = m.event_id AND (e.status = 'PENDING' OR e.lock_until <= $3)
  -- Only the newest version of each flight is published: the older ones need no value (a whole
  -- flight each) and no delivery lookup.
  RETURNING e.event_id, e.partition_key, e.event_type, CASE WHEN e.event_id = m.newest_id THEN e.value END AS value,
    CASE WHEN e.event_id = m.newest_id THEN e.headers END AS headers, e.attempts, e.source_kind, e.source_id,
    m.grp, m.newest_id
), flushed AS (
  -- A full flush leaves a backlog that has already waited: it is recorded as a flush of one
  -- period ago, so the next one may follow at once (the period aggregates, it does not throttle).
  INSERT INTO outbox_target (target, last_flush_at)
  SELECT $1, CASE WHEN (SELECT count(*) FROM pick) >= $2 THEN $6 ELSE $3 END WHERE EXISTS (SELECT 1 FROM claimed)
  ON CONFLICT (target) DO UPDATE SET last_flush_at = EXCLUDED.last_flush_at
)
SELECT c.*, CASE WHEN c.event_id = c.newest_id THEN
         (SELECT array_agg(d.publisher) FROM event_delivery d WHERE d.event_id = c.event_id AND d.outcome = 'ok') END AS delivered_to
FROM claimed c`;

/** Leases the head run of a target (after = 0) or the run after the caller's own batch; null = locked. */
export async function claimRun(
  ctx: DispatchContext,
  target: string,
  settings: DeliverySettings,
  now: Date,
  me: string,
  after: number,
  report: TargetReport,
): Promise<ClaimedRow[] | null> {
  const isSchd = target === 'schd';
  const nowMs = now.getTime();
  // Claim.
  const t0 = performance.now();
  const lockUntil = new Date(nowMs + ctx.config.outbox.leaseMs);
  let claimed: ClaimedRow[] | null;
  if (isSchd) {
    claimed = await ctx.db.tx(async (tx) => {
      // Like the ordinary claim (migration 009), the flush's claim does not wait for its WAL flush.
      const lock = await tx.query<{ ok: boolean }>(
        `SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok, set_config('synchronous_commit', 'off', true)`,
        [`msgx:target:${target}`],
      );
      if (!lock.rows[0]?.ok) return null;
      const periodStart = new Date(nowMs - ctx.config.outbox.schdFlushPeriodMs);
      return (await tx.query<ClaimedRow>(CLAIM_SCHD_SQL, [target, ctx.config.outbox.schdFlushLimit, now, lockUntil, me, periodStart])).rows;
    });
  } else {
    const rows = (await ctx.db.query<ClaimedRow & { locked: boolean }>(CLAIM_SQL, [target, settings.batchSize, now, lockUntil, me, after]))
      .rows;
    claimed = rows.length === 1 && rows[0]!.locked ? null : rows;
  }
  report.claimMs = round(report.claimMs + performance.now() - t0);
  if (claimed === null) return null;
  claimed.sort((a, b) => a.event_id - b.event_id);
  report.claimed += claimed.length;
  return claimed;
}
