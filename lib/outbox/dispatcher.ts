import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { claimRun, discoverHeads, type HeadRow } from './claim.ts';
import { decideRun, decideSchdFlush } from './decide.ts';
import { dispatchLogTargets } from './logDispatch.ts';
import { markRun } from './mark.ts';
import { noopMetrics } from './metrics.ts';
import { publishRun } from './publish.ts';
import { emptyReport, failedReport, round, sum, type DispatchReport, type TargetReport } from './report.ts';
import { logRound } from './roundLog.ts';
import { deliverySettingsFor, type DeliverySettings } from './settings.ts';
import type { DispatchContext, DispatchOptions, Publisher } from './types.ts';

// Importers reach the relay through this file (lib/jobs/dispatcherRole.ts, the tests).
export { topicForTarget } from './publish.ts';
export type { DispatchReport } from './report.ts';
export type { DispatchContext, DispatchOptions, SentEvent } from './types.ts';

/*
 * The outbox relay. With MSGX_OUTBOX_RELAY=log (the default) a round reads each target as a log
 * (lib/outbox/logDispatch.ts, docs/outbox.md "The dispatcher on the log"). With `claim`, the
 * per-event path below (docs/outbox.md "Delivery semantics"): for every target with open events,
 * claim the head run as a lease, publish it outside any transaction, record the outcome.
 *
 * Ordering argument, per target:
 * - A claim runs in its own short transaction that first takes the transaction advisory lock of
 *   the target; the claim statement starts after the lock, so its snapshot sees every earlier
 *   claim that committed. Two dispatchers therefore never claim from one target at once.
 * - A claim only starts at the target's head (lowest open event_id) and only when the head is
 *   claimable: PENDING (or DELIVERING with an expired lease) and due. A head leased by someone
 *   else, or backing off, holds the whole target: nothing overtakes it.
 * - Marks only touch rows still leased by us (`locked_by`); a dispatcher whose lease expired
 *   (crash, freeze) cannot overwrite the outcome of the one that reclaimed the rows.
 * - Lease (MSGX_DELIVERY_LEASE) > publish deadline is enforced at start, so a live dispatcher
 *   finishes publishing before anyone can reclaim its rows. A killed one's rows are retried after
 *   the lease: at least once, the duplicates carry the same msgx-event-id.
 */

const PROCESS_DISPATCHER_ID = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

/** One delivery round over every target (see the ordering argument at the top of this file). */
export async function dispatchOnce(
  ctx: DispatchContext,
  publishers: Publisher[] | ((target: string) => Publisher[]),
  options: DispatchOptions = {},
): Promise<DispatchReport> {
  const started = performance.now();
  const now = ctx.clock.now();
  const me = options.dispatcherId ?? PROCESS_DISPATCHER_ID;
  const metrics = options.metrics ?? noopMetrics;

  const { reports, discoverMs } =
    ctx.config.outbox.relay === 'log' ? await dispatchLogTargets(ctx, publishers, now, me, options) : await claimTargets();

  async function claimTargets(): Promise<{ reports: TargetReport[]; discoverMs: number }> {
    let heads = await discoverHeads(ctx);
    if (options.targets) heads = heads.filter((h) => options.targets!.includes(h.target));
    const discoverMs = performance.now() - started;
    const reports = await Promise.all(
      heads.map((head) => {
        const pubs = typeof publishers === 'function' ? publishers(head.target) : publishers;
        return deliverTarget(ctx, pubs, head, now, me, options).catch((err: unknown) => failedReport(ctx.log, head, now, err));
      }),
    );
    return { reports, discoverMs };
  }

  const report: DispatchReport = {
    targets: reports,
    sent: sum(reports, 'sent'),
    retried: sum(reports, 'retried'),
    dead: sum(reports, 'dead'),
    more: reports.some((r) => !!r.full),
    discoverMs: round(discoverMs),
    totalMs: round(performance.now() - started),
  };
  logRound(ctx.log, report);
  metrics.recordRound(report);
  return report;
}

/** One target's share of a round: the cheap head checks, then claim, publish, mark per batch. */
async function deliverTarget(
  ctx: DispatchContext,
  pubs: Publisher[],
  head: HeadRow,
  now: Date,
  me: string,
  options: DispatchOptions,
): Promise<TargetReport> {
  const report = emptyReport(head, now);
  const settings = settingsOf(ctx, head.target);
  const isSchd = head.target === 'schd';
  const nowMs = now.getTime();

  // Cheap checks on the head first, without a transaction: most rounds of a held target stop here.
  if (isSchd) {
    if (head.last_flush_at && nowMs - head.last_flush_at.getTime() < ctx.config.outbox.schdFlushPeriodMs) {
      report.skipped = 'flush-period';
      return report;
    }
  } else {
    if (head.status === 'DELIVERING' && head.lock_until && head.lock_until.getTime() > nowMs) {
      report.skipped = 'leased';
      return report;
    }
    if (head.next_attempt_at.getTime() > nowMs) {
      report.skipped = 'backoff';
      return report;
    }
  }

  // One batch at a time per target, pipelined: while batch N is being published, the run after it
  // is claimed (it is ours by lease, nobody can overtake), and batch N's marks are written while
  // batch N+1 is being published. N+1 is only published after N was taken by every publisher;
  // if N fails, N+1 goes back to PENDING unpublished.
  const maxBatches = isSchd ? 1 : Math.max(1, options.maxBatches ?? 1);
  const first = await claimRun(ctx, head.target, settings, now, me, 0, report);
  if (first === null) {
    report.skipped = 'locked';
    return report;
  }
  let cur = first;
  let at = now;
  let batches = 0;
  let marking: Promise<unknown> | null = null;
  try {
    while (cur.length > 0) {
      batches++;
      const wantMore =
        cur.length >= settings.batchSize && batches < maxBatches && ctx.clock.now().getTime() - nowMs < ctx.config.outbox.leaseMs / 2;
      const last = cur[cur.length - 1]!.event_id;
      const [sent, next] = await Promise.all([
        publishRun(ctx, pubs, head.target, settings, cur, report),
        wantMore ? claimRun(ctx, head.target, settings, ctx.clock.now(), me, last, report) : Promise.resolve(null),
      ]);
      if (marking) await marking;
      const input = { pubs, settings, now: at, sent: sent.rows, results: sent.results };
      const { updates, outcomes } = isSchd ? decideSchdFlush({ ...input, claimed: cur }) : decideRun(input);
      const failed = updates.some((u) => u.status !== 'SENT');
      if (failed && next?.length)
        for (const r of next)
          updates.push({ id: r.event_id, status: 'PENDING', attempts: r.attempts, nextAt: null, error: null, sentAs: null });
      // schd claims whole FLID groups: it is full when it took the flush limit's worth of flights.
      report.full =
        !failed && (isSchd ? new Set(cur.map((r) => r.grp)).size >= ctx.config.outbox.schdFlushLimit : cur.length >= settings.batchSize);
      marking = markRun(ctx, head.target, { updates, outcomes, sources: cur.map((r) => r.source_kind) }, at, me, options, report);
      marking.catch(() => {});
      if (failed || !next?.length) break;
      cur = next;
      at = ctx.clock.now();
    }
  } finally {
    if (marking) await marking;
  }
  return report;
}

function settingsOf(ctx: DispatchContext, target: string): DeliverySettings {
  return deliverySettingsFor(ctx.config.outbox, target);
}
