import { writeAudit } from '../audit/audit.ts';
import type { Db } from '../db/db.ts';

export interface ReplayRequest {
  /** Dead events to replay; or every dead event of `target`. One of the two is required. */
  ids?: number[];
  target?: string;
  dryRun?: boolean;
  /** Who asked, by the actor rule (lib/http/actor.ts); written to audit_log. */
  actor?: string;
  /** At most this many (default 10,000) per call. */
  limit?: number;
}

export interface ReplayResult {
  dryRun: boolean;
  /** Events that go (or would go) back to PENDING, in event_id order. */
  replayed: number[];
  /** Requested ids that were not replayed, with why. */
  skipped: { eventId: number; reason: string }[];
}

/**
 * Moves DEAD events back to PENDING with their own event_id (consumers keep deduplicating by
 * msgx-event-id), attempts 0 and due now; records one audit_log row per call (not for a dry run).
 *
 * A replayed event has an old event_id, so it becomes the head of its target at once and reaches
 * consumers after events that were sent while it was dead: replay does not restore the original
 * order (docs/ordering.md "What is ordered"). A schd version is not replayed when a newer version of the same flight
 * was already sent: the compacted topic would go back to an old state.
 */
export async function replayDeadEvents(db: Db, req: ReplayRequest, options: { now: Date }): Promise<ReplayResult> {
  if (!req.ids?.length && !req.target) throw new Error('replay needs ids or a target');
  const limit = Math.min(Math.max(1, req.limit ?? 10_000), 100_000);
  return db.tx(async (tx) => {
    const rows = (
      await tx.query<{ event_id: number; target: string; status: string; superseded: boolean }>(
        // States as every reader derives them (msgx_event_state, msgx_outbox_dead: migration 014).
        `SELECT e.event_id, e.target, msgx_event_state(e.status, e.target, e.event_id, e.writer_xid, $4) AS status,
                (e.target = 'schd' AND e.flid IS NOT NULL AND EXISTS (
                   SELECT 1 FROM msg_event n
                   WHERE n.target = 'schd' AND n.flid = e.flid AND n.state_version > e.state_version
                     AND msgx_event_state(n.status, n.target, n.event_id, n.writer_xid, $4) = 'SENT')) AS superseded
         FROM msg_event e
         WHERE ($1::bigint[] IS NULL OR e.event_id = ANY($1))
           AND ($2::text IS NULL OR e.target = $2)
           -- By target: its dead events, not the first rows of its history.
           AND ($1::bigint[] IS NOT NULL OR e.event_id IN (SELECT d.event_id FROM msgx_outbox_dead() d WHERE d.target = $2))
         ORDER BY e.event_id
         LIMIT $3
         FOR UPDATE OF e`,
        [req.ids?.length ? req.ids : null, req.target ?? null, limit, options.now],
      )
    ).rows;
    const skipped: ReplayResult['skipped'] = [];
    const replayed: number[] = [];
    const found = new Set(rows.map((r) => r.event_id));
    for (const id of req.ids ?? []) if (!found.has(id)) skipped.push({ eventId: id, reason: 'no such event' });
    for (const r of rows) {
      if (r.status !== 'DEAD') {
        if (req.ids?.length) skipped.push({ eventId: r.event_id, reason: `status is ${r.status}, not DEAD` });
      } else if (r.superseded) skipped.push({ eventId: r.event_id, reason: 'superseded: a newer schd version was sent' });
      else replayed.push(r.event_id);
    }
    if (!req.dryRun && replayed.length > 0) {
      await tx.query(
        `UPDATE msg_event SET status = 'PENDING', attempts = 0, next_attempt_at = $2, lock_until = NULL,
                locked_by = NULL, dead_at = NULL, sent_at = NULL, sent_as = NULL
         WHERE event_id = ANY($1) AND status = 'DEAD'`,
        [replayed, options.now],
      );
      // The log relay's dead events are its exceptions: due again, attempts 0, behind nothing of their key
      // that is older. An event the per-event path killed on a target that is now read as a log
      // (its cursor passed it) becomes such an exception too.
      await tx.query(
        `WITH up AS (
           UPDATE outbox_exception SET dead = false, attempts = 0, next_attempt_at = $2, updated_at = $2
           WHERE event_id = ANY($1) AND dead RETURNING event_id)
         INSERT INTO outbox_exception (target, event_id, attempts, next_attempt_at, partition_key, updated_at)
         SELECT e.target, e.event_id, 0, $2, e.partition_key, $2
         FROM msg_event e JOIN outbox_target t ON t.target = e.target AND t.snap_lo IS NOT NULL
         WHERE e.event_id = ANY($1) AND e.event_id NOT IN (SELECT event_id FROM up)
           AND pg_visible_in_snapshot(e.writer_xid, t.snap_lo)
         ON CONFLICT (target, event_id) DO NOTHING`,
        [replayed, options.now],
      );
      await writeAudit(tx, {
        at: options.now,
        actor: req.actor ?? 'unknown',
        action: 'outbox.replay',
        detail: { kind: 'event', ids: req.ids ?? null, target: req.target ?? null, replayed, skipped },
      });
      await tx.query(`SELECT pg_notify('msgx_outbox', '')`);
    }
    return { dryRun: !!req.dryRun, replayed, skipped };
  });
}
