import type { Log } from '../observability/logger.ts';
/* What a delivery round reports: per target, and summed over the round. Its own file because
 * every stage of a round (read, publish, finish) adds to the same TargetReport. */

export interface TargetReport {
  target: string;
  /** Why nothing was read: another dispatcher holds it, its head is backing off, or the schd period is not over. */
  skipped?: 'leased' | 'backoff' | 'flush-period' | 'error';
  /** Events read from the log (and failed heads retried). */
  claimed: number;
  /** Records handed to the publishers (schd: one per FLID). */
  published: number;
  sent: number;
  retried: number;
  dead: number;
  /** The last batch was full: more may be waiting. */
  full?: boolean;
  /** Events of a batch whose target's lease we had lost by the time we finished it (someone else delivers them). */
  lostLease: number;
  oldestPendingSeconds: number;
  claimMs: number;
  publishMs: Record<string, number>;
  markMs: number;
  error?: string;
}

export interface DispatchReport {
  targets: TargetReport[];
  sent: number;
  retried: number;
  dead: number;
  /** A target claimed a full batch: call again at once instead of waiting for the poll interval. */
  more: boolean;
  discoverMs: number;
  totalMs: number;
}

/** A target's report before anything happened; its age is that of its head event. */
export function emptyReport(head: { target: string; created_at: Date }, now: Date): TargetReport {
  return {
    target: head.target,
    claimed: 0,
    published: 0,
    sent: 0,
    retried: 0,
    dead: 0,
    lostLease: 0,
    oldestPendingSeconds: Math.max(0, Math.round((now.getTime() - new Date(head.created_at).getTime()) / 1000)),
    claimMs: 0,
    publishMs: {},
    markMs: 0,
  };
}

export const sum = (rs: TargetReport[], k: 'sent' | 'retried' | 'dead') => rs.reduce((n, r) => n + r[k], 0);
/** Milliseconds to one decimal: the timings are logged and emitted as metrics. */
export const round = (ms: number) => Math.round(ms * 10) / 10;

/** A target whose delivery threw: reported as skipped with the error, and logged; the other targets go on. */
export function failedReport(log: Pick<Log, 'error'>, head: { target: string; created_at: Date }, now: Date, err: unknown): TargetReport {
  const r = emptyReport(head, now);
  r.skipped = 'error';
  r.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  log.error({ message: 'outbox_target_failed', target: head.target, error: r.error });
  return r;
}
