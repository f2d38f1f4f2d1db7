import type { Queryable } from '../db/db.ts';

/**
 * Counts over proc_state for the alarms' gauges and the console's throughput chart
 * (lib/observability reads them through these functions; the pipeline owns the table).
 */

export interface QueueGauges {
  /** Seconds since the head (the smallest open msg_id) was enqueued; 0 when nothing is open. */
  headAgeSeconds: number;
  /** Open messages (PENDING or FAILED). */
  backlog: number;
  /** Messages that went DEAD after `since`. */
  deadSince: number;
}

export async function queueGauges(q: Queryable, now: Date, since: Date): Promise<QueueGauges> {
  const r = await q.query<{ head_age: number | null; backlog: number; dead_proc: number }>(
    `SELECT
       (SELECT extract(epoch FROM $1 - min(enqueued_at)) FROM proc_state
          WHERE msg_id = (SELECT min(msg_id) FROM proc_state WHERE status IN ('PENDING', 'FAILED')))::float8 AS head_age,
       (SELECT count(*) FROM proc_state WHERE status IN ('PENDING', 'FAILED'))::int AS backlog,
       (SELECT count(*) FROM proc_state WHERE status = 'DEAD' AND finished_at > $2)::int AS dead_proc`,
    [now, since],
  );
  const row = r.rows[0]!;
  return { headAgeSeconds: Math.max(0, row.head_age ?? 0), backlog: row.backlog, deadSince: row.dead_proc };
}

/** Messages that reached a terminal state in a span, and their latency (finished_at − enqueued_at). */
export interface FinishedCounts {
  processed: number;
  succeeded: number;
  skipped: number;
  dead: number;
  /** null when nothing finished. */
  latencyAvgMs: number | null;
  latencyP95Ms: number | null;
}

const LATENCY_MS = `extract(epoch FROM (finished_at - enqueued_at)) * 1000`;

const counts = (r: Record<string, unknown>): FinishedCounts => ({
  processed: Number(r.processed ?? 0),
  succeeded: Number(r.succeeded ?? 0),
  skipped: Number(r.skipped ?? 0),
  dead: Number(r.dead ?? 0),
  latencyAvgMs: r.avg_ms === null || r.avg_ms === undefined ? null : Number(r.avg_ms),
  latencyP95Ms: r.p95_ms === null || r.p95_ms === undefined ? null : Number(r.p95_ms),
});

/**
 * Per minute in [start, end) with anything finished (by proc_state.finished_at, indexed), in
 * order; minutes without work are absent.
 */
export async function finishedPerMinute(
  q: Queryable,
  start: Date,
  end: Date,
): Promise<(FinishedCounts & { minuteMs: number; latencyMaxMs: number | null })[]> {
  const r = await q.query<Record<string, unknown>>(
    `SELECT floor(extract(epoch FROM finished_at) / 60)::bigint * 60000 AS minute_ms,
            count(*)::int AS processed,
            count(*) FILTER (WHERE status = 'SUCCEEDED')::int AS succeeded,
            count(*) FILTER (WHERE status = 'SKIPPED')::int AS skipped,
            count(*) FILTER (WHERE status = 'DEAD')::int AS dead,
            avg(${LATENCY_MS})::float8 AS avg_ms,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY ${LATENCY_MS})::float8 AS p95_ms,
            max(${LATENCY_MS})::float8 AS max_ms
     FROM proc_state
     WHERE finished_at IS NOT NULL AND finished_at >= $1 AND finished_at < $2
     GROUP BY 1 ORDER BY 1`,
    [start, end],
  );
  return r.rows.map((x) => ({
    ...counts(x),
    minuteMs: Number(x.minute_ms),
    latencyMaxMs: x.max_ms === null || x.max_ms === undefined ? null : Number(x.max_ms),
  }));
}

/** The same over the whole of [start, end). */
export async function finishedTotals(q: Queryable, start: Date, end: Date): Promise<FinishedCounts> {
  const r = await q.query<Record<string, unknown>>(
    `SELECT count(*)::int AS processed,
            count(*) FILTER (WHERE status = 'SUCCEEDED')::int AS succeeded,
            count(*) FILTER (WHERE status = 'SKIPPED')::int AS skipped,
            count(*) FILTER (WHERE status = 'DEAD')::int AS dead,
            avg(${LATENCY_MS})::float8 AS avg_ms,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY ${LATENCY_MS})::float8 AS p95_ms
     FROM proc_state WHERE finished_at IS NOT NULL AND finished_at >= $1 AND finished_at < $2`,
    [start, end],
  );
  return counts(r.rows[0] ?? {});
}
