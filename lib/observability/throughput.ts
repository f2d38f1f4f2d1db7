import type { Queryable } from '../db/db.ts';
import { type FinishedCounts, finishedPerMinute, finishedTotals } from '../pipeline/procStats.ts';

/**
 * Per-minute throughput and latency of the inbox pipeline over a recent window, for the console's
 * chart (`GET /admin/throughput`). Read from proc_state.finished_at (indexed) through the
 * pipeline's procStats.ts: a message counts in the minute it reached a terminal state; its latency
 * is finished_at − enqueued_at. Minutes with no work are present with zero counts, so the chart's
 * x axis is continuous.
 */
/** One minute's finished messages (latencies null when nothing finished in that minute). */
export interface MinuteBucket extends FinishedCounts {
  /** Start of the minute, ISO. */
  minute: string;
  latencyMaxMs: number | null;
}

export interface Throughput {
  from: string;
  to: string;
  minutes: number;
  buckets: MinuteBucket[];
  totals: FinishedCounts;
}

export async function readThroughput(db: Queryable, now: Date, minutes = 60): Promise<Throughput> {
  const n = Math.min(Math.max(1, Math.floor(minutes)), 24 * 60);
  const end = new Date(Math.floor(now.getTime() / 60_000) * 60_000 + 60_000); // end of the current minute
  const start = new Date(end.getTime() - n * 60_000);
  const [rows, totals] = await Promise.all([finishedPerMinute(db, start, end), finishedTotals(db, start, end)]);
  const byMinute = new Map(rows.map((r) => [r.minuteMs, r]));
  const num = (v: number | null) => (v === null ? null : Math.round(v));
  const buckets: MinuteBucket[] = [];
  for (let t = start.getTime(); t < end.getTime(); t += 60_000) {
    const r = byMinute.get(t);
    buckets.push({
      minute: new Date(t).toISOString(),
      processed: r ? r.processed : 0,
      succeeded: r ? r.succeeded : 0,
      skipped: r ? r.skipped : 0,
      dead: r ? r.dead : 0,
      latencyAvgMs: r ? num(r.latencyAvgMs) : null,
      latencyP95Ms: r ? num(r.latencyP95Ms) : null,
      latencyMaxMs: r ? num(r.latencyMaxMs) : null,
    });
  }
  return {
    from: start.toISOString(),
    to: end.toISOString(),
    minutes: n,
    buckets,
    totals: { ...totals, latencyAvgMs: num(totals.latencyAvgMs), latencyP95Ms: num(totals.latencyP95Ms) },
  };
}
