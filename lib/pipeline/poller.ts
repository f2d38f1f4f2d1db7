import type { AppContext } from '../app/context.ts';
import { FRONTIER_KEY, loadFrontier, saveFrontier } from './frontier.ts';
import { advance, idsIn } from './gaps.ts';
import { noteEnqueued } from './justEnqueued.ts';
import { enqueueMessages, enqueueWithFact, INBOX_CHANNEL } from './procState.ts';

/** The ingress NOTIFYs this channel after a mailbox insert: the poller reads the row at once. */
export const MAILBOX_CHANNEL = 'msgx_mailbox';

export interface PollResult {
  scanned: number;
  enqueued: number;
  /** The accounted-up-to frontier after this poll: the pump runs nothing above it. */
  watermark: number;
  /** The read was full: more rows may be waiting. */
  more: boolean;
  /** Gaps still waited for (the poller should come back before the grace ends). */
  waiting: number;
}

/**
 * Reads the mailbox in ID order above the scanned mark (ID, date and processed flag of every row),
 * re-checks the open gaps and recent holes by ID, enqueues the unprocessed rows and moves the
 * frontier (lib/pipeline/gaps.ts, docs/ordering.md), all in one transaction. The caller holds the
 * poller's lock: one poller at a time owns the frontier.
 */
export async function pollOnce(ctx: Pick<AppContext, 'db' | 'mailbox' | 'clock' | 'config' | 'log'>): Promise<PollResult> {
  const { claimBatch, gapGraceMs, holeRecheckMs } = ctx.config.pipeline;
  const now = ctx.clock.now();
  // Far behind, one read takes several batches: IDs and flags are small, the texts come later.
  const limit = claimBatch * 4;
  // The wake-up path: read the mailbox from where this process last left off while the frontier
  // loads; if the stored mark says otherwise (another process polled, a restart), read again.
  const guess = lastScanned.get(ctx.db);
  const [{ frontier, gaps }, early] = await Promise.all([
    loadFrontier(ctx.db, new Date(now.getTime() - holeRecheckMs)),
    guess === undefined ? undefined : ctx.mailbox.scanIds(guess, limit),
  ]);
  const [fresh, inGaps] = await Promise.all([
    early && guess === frontier.scanned ? early : ctx.mailbox.scanIds(frontier.scanned, limit),
    ctx.mailbox.readRanges(gaps.map((g) => [g.lo, g.hi])),
  ]);
  const r = advance({ frontier, gaps, inGaps, fresh, now, graceMs: gapGraceMs });
  lastScanned.delete(ctx.db); // set again only once this tick's frontier is stored
  const moved = r.frontier.accounted !== frontier.accounted || r.frontier.scanned !== frontier.scanned;
  if (!moved && r.enqueue.length === 0 && JSON.stringify(r.gaps) === JSON.stringify(gaps)) {
    lastScanned.set(ctx.db, frontier.scanned);
    return { scanned: fresh.length, enqueued: 0, watermark: frontier.accounted, more: false, waiting: waitingOf(r.gaps) };
  }

  // The common tick (new rows, no gap opened, closed or given up): one statement, one round trip.
  const woke = r.frontier.accounted > frontier.accounted;
  if (r.late.length === 0 && r.newHoles.length === 0 && JSON.stringify(r.gaps) === JSON.stringify(gaps)) {
    const wake = ctx.db.localWake(INBOX_CHANNEL);
    const { ids, notified } = await enqueueWithFact(
      ctx.db,
      r.enqueue,
      now,
      { key: FRONTIER_KEY, value: r.frontier },
      woke,
      wake.payload,
      !wake.owned,
    );
    noteEnqueued(ctx.mailbox, ids, ctx.config.pipeline.groupCommit);
    if (notified) wake.now();
    lastScanned.set(ctx.db, r.frontier.scanned);
    return {
      scanned: fresh.length,
      enqueued: ids.length,
      watermark: r.frontier.accounted,
      more: fresh.length >= limit,
      waiting: waitingOf(r.gaps),
    };
  }

  // Gaps opened, closed or given up: the frontier's tables change with the enqueue, in one
  // transaction. Its wake reaches this process's pump at commit, like the common tick's.
  // As on the common tick, no NOTIFY while the pump of this process holds the lock.
  const wake = ctx.db.localWake(INBOX_CHANNEL);
  const enqueued = await ctx.db.tx(async (tx) => {
    // The mailbox is the durable record: a commit lost in a crash is read again by the next poll.
    // (WAL is one sequence: a pump commit that follows is durable only with this one before it.)
    // So the wake-up path does not wait for a WAL flush here.
    await tx.query(`SET LOCAL synchronous_commit TO OFF`);
    const ids = await enqueueMessages(tx, r.enqueue, now, wake.payload, !wake.owned);
    const fresh = new Set(ids);
    await saveFrontier(tx, {
      loaded: gaps,
      gaps: r.gaps,
      frontier: r.frontier,
      newHoleIds: idsIn(r.newHoles),
      late: r.late.filter((id) => fresh.has(id)),
      now,
    });
    // The pump waits on the frontier, not only on new rows: wake it when the frontier moves.
    if (woke && ids.length === 0 && !wake.owned) await tx.query(`SELECT pg_notify($1, $2)`, [INBOX_CHANNEL, wake.payload]);
    return ids.length;
  });
  if (enqueued > 0 || woke) wake.now();
  lastScanned.set(ctx.db, r.frontier.scanned);
  for (const h of r.newHoles)
    ctx.log.warn('mailbox IDs declared a hole: no row committed within the grace; the pipeline moves on', {
      from: h.lo,
      to: h.hi,
      waitedMs: now.getTime() - h.firstSeen.getTime(),
    });
  for (const id of r.late) ctx.log.warn('a row committed after its ID was declared a hole; processing it late', { msgId: id });
  return { scanned: fresh.length, enqueued, watermark: r.frontier.accounted, more: fresh.length >= limit, waiting: waitingOf(r.gaps) };
}

/** Per database: the scanned mark this process last stored (only a hint; the stored one decides). */
const lastScanned = new WeakMap<object, number>();

const waitingOf = (gaps: { holeAt: Date | null }[]) => gaps.filter((g) => g.holeAt === null).length;
