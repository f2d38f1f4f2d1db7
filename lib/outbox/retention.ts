import type { Queryable } from '../db/db.ts';
import type { Log } from '../observability/logger.ts';

const DAY_MS = 86_400_000;

export interface EventRetentionResult {
  /** The smallest event_id that must stay; every delivered event below it is removed. */
  cut: number | null;
  deleted: number;
  /** DELETE statements issued: one per chunk of ids, never one per event. */
  chunks: number;
  /** Stopped at maxChunks or the time share before reaching the cut (the next run goes on). */
  partial: boolean;
}

/**
 * Removes delivered events older than the retention window by RANGE (docs/outbox.md "Retention").
 * One cut is computed: the smallest event_id that must stay because it is inside the window, still
 * open for its target (anything msgx_outbox_open returns: not passed by the cursor, a failed head,
 * an exception still retried, a row the per-event path holds), or `keepFrom` (the delivery a
 * transactional message still waits for, which lib/txmsg reads). Below the cut everything is delivered or dead; dead events and any event
 * with an exception row stay (replay needs them). The delete then goes in chunks of `chunk` ids, one
 * statement each. event_delivery outcomes go with their events (the statement trigger of 009), and so
 * do the log relay's outbox_batch rows, by range: those whose ids all lie below the chunk's end.
 * Cursors keep their after_id and snapshots: a cursor below the cut only points at ids no longer there.
 */
export async function sweepDeliveredEvents(
  db: Queryable,
  opts: {
    now: Date;
    retentionDays: number;
    /** An id to keep and everything above it: the oldest delivery a transactional message still waits for. */
    keepFrom?: number | null;
    chunk?: number;
    maxChunks?: number;
    /** performance.now() at which to stop between chunks (the sweep's share). */
    until?: number;
    log?: Pick<Log, 'info'>;
  },
): Promise<EventRetentionResult> {
  const chunk = opts.chunk ?? 10_000;
  const maxChunks = opts.maxChunks ?? 100;
  const windowStart = new Date(opts.now.getTime() - opts.retentionDays * DAY_MS);
  // Each bound separately so each reads an index: the PK from its low end (rows below the window are
  // only the kept dead ones once retention ran), the open set, the in-flight deliveries.
  const r = await db.query<{ cut: string | null; lo: string | null }>(
    `WITH bounds AS (
       SELECT (SELECT e.event_id FROM msg_event e WHERE e.created_at >= $1 ORDER BY e.event_id LIMIT 1) AS in_window,
              (SELECT min(o.event_id) FROM msgx_outbox_open($2) o) AS open,
              $3::bigint AS in_flight,
              (SELECT max(e.event_id) + 1 FROM msg_event e) AS past_end)
     SELECT least(in_window, open, in_flight, past_end)::text AS cut,
            (SELECT min(e.event_id) FROM msg_event e
              WHERE e.event_id < least(b.in_window, b.open, b.in_flight, b.past_end)
                AND e.dead_at IS NULL AND e.status <> 'DEAD'
                AND NOT EXISTS (SELECT 1 FROM outbox_exception x WHERE x.target = e.target AND x.event_id = e.event_id))::text AS lo
     FROM bounds b`,
    [windowStart, opts.now, opts.keepFrom ?? null],
  );
  const cut = r.rows[0]?.cut == null ? null : Number(r.rows[0].cut);
  let lo = r.rows[0]?.lo == null ? null : Number(r.rows[0].lo);
  const result: EventRetentionResult = { cut, deleted: 0, chunks: 0, partial: false };
  if (cut === null || lo === null) return result;
  while (lo < cut) {
    if (result.chunks >= maxChunks || (opts.until !== undefined && performance.now() >= opts.until)) {
      result.partial = true;
      break;
    }
    const hi = Math.min(lo + chunk, cut);
    const d = await db.query(
      // The batch outcomes wholly below the chunk's end go with it (all their events were delivered).
      `WITH b AS (DELETE FROM outbox_batch WHERE int8range(lo_id, hi_id, '[]') << int8range($2, NULL))
       DELETE FROM msg_event e
        WHERE e.event_id >= $1 AND e.event_id < $2
          AND e.dead_at IS NULL AND e.status <> 'DEAD'
          AND NOT EXISTS (SELECT 1 FROM outbox_exception x WHERE x.target = e.target AND x.event_id = e.event_id)`,
      [lo, hi],
    );
    result.chunks++;
    result.deleted += d.rowCount;
    lo = hi;
  }
  if (result.chunks > 0)
    opts.log?.info('event retention', { cut, deleted: result.deleted, chunks: result.chunks, partial: result.partial });
  return result;
}
