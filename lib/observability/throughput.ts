import type { Queryable } from '../db/db.ts';

/**
 * Per-minute throughput and latency of the inbox pipeline over a recent window, for the console's
 * chart (`GET /admin/throughput`). Read from proc_state.finished_at (indexed): a message counts in
 * the minute it reached a terminal state; its latency is finished_at − enqueued_at. Minutes with no
 * work are present with zero counts, so the chart's x axis is continuous.
 */
export interface MinuteBucket {
  /** Start of the minute, ISO. */
  minute: string;
  processed: number;
  succeeded: number;
  skipped: number;
  dead: number;
  /** null when nothing finished in that minute. */
  latencyAvgMs: number | null;
  latencyP95Ms: number | null;
  latencyMaxMs: number | null;
}

export interface Throughput {
  from: string;
  to: string;
  minutes: number;
  buckets: MinuteBucket[];
  totals: { processed: number; succeeded: number; skipped: number; dead: number; latencyAvgMs: number | null; latencyP95Ms: number | null };
}

export async function readThroughput(db: Queryable, now: Date, minutes = 60): Promise<Throughput> {
  const n = Math.min(Math.max(1, Math.floor(minutes)), 24 * 60);
  const end = new Date(Math.floor(now.getTime() / 60_000) * 60_000 + 60_000); // end of the current minute
  const start = new Date(end.getTime() - n * 60_000);
  const lat = `extract(epoch FROM (finished_at - enqueued_at)) * 1000`;
  const [rows, totals] = await Promise.all([
    db.query<Record<string, unknown>>(
      `SELECT floor(extract(epoch FROM finished_at) / 60)::bigint * 60000 AS minute_ms,
              count(*)::int AS processed,
              count(*) FILTER (WHERE status = 'SUCCEEDED')::int AS succeeded,
              count(*) FILTER (WHERE status = 'SKIPPED')::int AS skipped,
              count(*) FILTER (WHERE status = 'DEAD')::int AS dead,
              avg(${lat})::float8 AS avg_ms,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY ${lat})::float8 AS p95_ms,
              max(${lat})::float8 AS max_ms
       FROM proc_state
       WHERE finished_at IS NOT NULL AND finished_at >= $1 AND finished_at < $2
       GROUP BY 1 ORDER BY 1`,
      [start, end],
    ),
    db.query<Record<string, unknown>>(
      `SELECT count(*)::int AS processed,
              count(*) FILTER (WHERE status = 'SUCCEEDED')::int AS succeeded,
              count(*) FILTER (WHERE status = 'SKIPPED')::int AS skipped,
              count(*) FILTER (WHERE status = 'DEAD')::int AS dead,
              avg(${lat})::float8 AS avg_ms,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY ${lat})::float8 AS p95_ms
       FROM proc_state WHERE finished_at IS NOT NULL AND finished_at >= $1 AND finished_at < $2`,
      [start, end],
    ),
  ]);
  const byMinute = new Map(rows.rows.map((r) => [Number(r.minute_ms), r]));
  const num = (v: unknown) => (v === null || v === undefined ? null : Math.round(Number(v)));
  const buckets: MinuteBucket[] = [];
  for (let t = start.getTime(); t < end.getTime(); t += 60_000) {
    const r = byMinute.get(t);
    buckets.push({
      minute: new Date(t).toISOString(),
      processed: r ? Number(r.processed) : 0,
      succeeded: r ? Number(r.succeeded) : 0,
      skipped: r ? Number(r.skipped) : 0,
      dead: r ? Number(r.dead) : 0,
      latencyAvgMs: r ? num(r.avg_ms) : null,
      latencyP95Ms: r ? num(r.p95_ms) : null,
      latencyMaxMs: r ? num(r.max_ms) : null,
    });
  }
  const t = totals.rows[0] ?? {};
  return {
    from: start.toISOString(),
    to: end.toISOString(),
    minutes: n,
    buckets,
    totals: {
      processed: Number(t.processed ?? 0),
      succeeded: Number(t.succeeded ?? 0),
      skipped: Number(t.skipped ?? 0),
      dead: Number(t.dead ?? 0),
      latencyAvgMs: num(t.avg_ms),
      latencyP95Ms: num(t.p95_ms),
    },
  };
}
