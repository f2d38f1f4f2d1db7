import { isDeadLocalDispatcher } from './dispatcherId.ts';
import { relayBatch, type Finishing, type PageAhead } from './logBatch.ts';
import { KEYS_SQL, retryHeads } from './logFailures.ts';
import { DISCOVER_SQL, ENSURE_CURSOR_SQL, keyOf, LEASE_SQL, RELEASE_SQL, type TargetRow } from './logLease.ts';
import { emptyReport, failedReport, round, type TargetReport } from './report.ts';
import { deliverySettingsFor } from './settings.ts';
import type { DispatchContext, DispatchOptions, Publisher } from './types.ts';

/*
 * The relay read as a log (docs/outbox.md "The log and its cursors"). Per target and round:
 *
 * - A lease on the target's cursor row (lease_owner, lease_until) taken in the statement that
 *   opens and reads the batch: who holds an unexpired lease is the only one delivering the target.
 *   A killed dispatcher's open batch (snap_hi, after_id) is read again by whoever takes the lease
 *   after it expired: at least once, the same msgx-event-id.
 * - The batch is what committed between the cursor's two snapshots, in event_id order; it goes to
 *   every publisher of the target; one statement moves the cursor past it and releases the lease.
 *   Two writes per batch, whatever it holds; events are never updated.
 * - A failure is kept per event in outbox_exception (attempts, next attempt, last error, dead). A
 *   failed event is the target's head (at_head): the cursor stops before it and the target waits
 *   until its next attempt, nothing overtakes it; once dead, the cursor passes it. schd's flights
 *   are independent: a failed one is retried on its own and its later versions wait behind it.
 * - An outage of the destination charges nobody: the cursor stops before the first event not
 *   taken and the whole target waits (hold_until), shown stalled with the reason.
 * - A full page reads the next one while it is published, from its own end (nothing written): that
 *   page goes on behind a page that passed whole, whose finish keeps the lease for it and runs while
 *   the next page publishes; otherwise it is dropped and read again from the cursor.
 *
 * This file is the round; logLease.ts the cursor rows and their reads, logBatch.ts one batch,
 * logFailures.ts the exceptions and their retries, logSchd.ts schd's flights.
 */

/** Batches read, published and finished as one page when a round may relay that many. */
const PAGE_BATCHES = 10;

/** The log relay's round: every target with something to do, each under its own lease. */
export async function dispatchLogTargets(
  ctx: DispatchContext,
  publishers: Publisher[] | ((target: string) => Publisher[]),
  now: Date,
  me: string,
  options: DispatchOptions,
): Promise<{ reports: TargetReport[]; discoverMs: number }> {
  const t0 = performance.now();
  let targets = (await ctx.db.query<TargetRow>(DISCOVER_SQL)).rows;
  if (options.targets) targets = targets.filter((t) => options.targets!.includes(t.target));
  const discoverMs = round(performance.now() - t0);
  const work = targets.filter((t) => t.has_new || t.open_batch || t.has_exceptions);
  const reports = await Promise.all(
    work.map((t) => {
      const pubs = typeof publishers === 'function' ? publishers(t.target) : publishers;
      return deliverLogTarget(ctx, pubs, t, now, me, options).catch((err: unknown) => failedReport(ctx.log, t, now, err));
    }),
  );
  return { reports, discoverMs };
}

async function deliverLogTarget(
  ctx: DispatchContext,
  pubs: Publisher[],
  t: TargetRow,
  now: Date,
  me: string,
  options: DispatchOptions,
): Promise<TargetReport> {
  const report = emptyReport(t, now);
  const target = t.target;
  const settings = deliverySettingsFor(ctx.config.outbox, target);
  const isSchd = target === 'schd';
  const nowMs = now.getTime();
  const leaseUntil = () => new Date(ctx.clock.now().getTime() + ctx.config.outbox.leaseMs);

  if (t.lease_owner && t.lease_owner !== me && t.lease_until && t.lease_until.getTime() > nowMs) {
    // A lease of a process of this host that is gone is not waited out (a twin killed and started
    // again delivered nothing for the lease's 30 s); one still taken by then is someone else's.
    // Only where host and pid name a process: Lambda sandboxes may share both.
    const gone = ctx.config.runtime === 'twin' && isDeadLocalDispatcher(t.lease_owner);
    if (!gone || (await ctx.db.query(RELEASE_SQL, [target, t.lease_owner])).rowCount !== 1) {
      report.skipped = 'leased';
      return report;
    }
    ctx.log.info({ message: 'outbox_lease_taken_over', target, from: t.lease_owner, reason: 'its process is gone' });
  }
  if (t.hold_until && t.hold_until.getTime() > nowMs) {
    report.skipped = 'backoff';
    return report;
  }
  if (isSchd && t.last_flush_at && nowMs - t.last_flush_at.getTime() < ctx.config.outbox.schdFlushPeriodMs) {
    report.skipped = 'flush-period';
    return report;
  }
  if (!t.has_cursor) await ctx.db.query(ENSURE_CURSOR_SQL, [target]);

  let holding = false;
  try {
    // 1. Failed heads that are due, key by key; a success lets the next event of its key go at once.
    if (t.exception_due && t.exception_due.getTime() <= nowMs) {
      const leased = await ctx.db.query(LEASE_SQL, [target, me, leaseUntil(), ctx.clock.now()]);
      if (leased.rowCount !== 1) {
        report.skipped = 'leased';
        return report;
      }
      holding = true;
      for (let i = 0; i < 10; i++) {
        const r = await retryHeads(ctx, pubs, target, settings, me, options, report);
        if (r === 'stalled') return report;
        if (r === 'idle') break;
      }
    }

    // 2. The log's batches.
    if (!(t.has_new || t.open_batch)) return report;
    const held = new Set<string>();
    if (t.has_exceptions || report.retried > 0 || report.dead > 0)
      for (const r of (await ctx.db.query<{ partition_key: string | null }>(KEYS_SQL, [target])).rows) held.add(keyOf(r.partition_key));
    // Pages of several batches: the read and the finish are paid once per page, not per batch,
    // while the batches are published one after another as before. A full page reads the next one
    // while it publishes (the round's next page, when it has one), so the read waits on nothing.
    const maxBatches = isSchd ? 1 : Math.max(1, options.maxBatches ?? 1);
    const pageLimit = (b: number) => settings.batchSize * Math.min(PAGE_BATCHES, maxBatches - b);
    let ahead: PageAhead | undefined;
    let finishing: Finishing | undefined;
    for (let b = 0; b < maxBatches;) {
      // A page is as many batches as the round has left, at most PAGE_BATCHES; what it held counts.
      const limit = isSchd ? ctx.config.outbox.schdFlushLimit : pageLimit(b);
      // A page read ahead is only ever a full one's successor: it starts PAGE_BATCHES further on.
      const after = b + Math.min(PAGE_BATCHES, maxBatches - b);
      const nextLimit = isSchd || after >= maxBatches ? 0 : pageLimit(after);
      const before = report.claimed;
      const out = await relayBatch(ctx, pubs, target, settings, limit, me, leaseUntil(), held, options, report, {
        ahead,
        nextLimit,
        prior: finishing,
      });
      ahead = out.next;
      finishing = out.finishing;
      holding = out.r !== 'lost';
      b += Math.max(1, Math.ceil((report.claimed - before) / settings.batchSize));
      if (out.r !== 'more') break;
      // The finish kept the lease for the page read ahead.
      holding = ahead !== undefined;
      if (ctx.clock.now().getTime() - nowMs >= ctx.config.outbox.leaseMs / 2) {
        report.full = true;
        break;
      }
    }
    // The last page's finish, when it ran behind a publish; a page read ahead that the round has no
    // time for is read again next round, lease released.
    const kept = finishing ? await finishing : true;
    if (ahead) await ahead.catch(() => {});
    holding = ahead !== undefined && kept;
    return report;
  } finally {
    if (holding) await ctx.db.query(RELEASE_SQL, [target, me]).catch(() => {});
  }
}
