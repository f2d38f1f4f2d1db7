import type { Log } from '../observability/logger.ts';
import type { DispatchReport } from './report.ts';

/** One line per round (docs/outbox.md "Operations", Log): the time of every stage, per target. */
export function logRound(log: Log, r: DispatchReport): void {
  const active = r.targets.filter((t) => t.claimed > 0 || t.skipped === 'error');
  const line = {
    message: 'outbox_dispatch_timing',
    total_ms: r.totalMs,
    discover_ms: r.discoverMs,
    sent: r.sent,
    retried: r.retried,
    dead: r.dead,
    targets: active.map((t) => ({
      target: t.target,
      claimed: t.claimed,
      published: t.published,
      sent: t.sent,
      retried: t.retried,
      dead: t.dead,
      claim_ms: t.claimMs,
      publish_ms: t.publishMs,
      mark_ms: t.markMs,
      oldest_pending_s: t.oldestPendingSeconds,
    })),
  };
  // Idle and held-back rounds log at debug only: a poison event's backoff must not fill the log.
  if (active.length > 0) log.info(line);
  else log.debug(line);
}
