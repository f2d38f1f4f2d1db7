import type { AppContext } from '../app/context.ts';
import { applyAction } from './actions.ts';
import { callCheckBack, type CheckOutcome } from './checkCall.ts';
import { move } from './move.ts';
import { claimDueChecks, lockMessage, type TxRow, updateMessage } from './store.ts';
import { appendTrace } from './trace.ts';

/** Parallel check-back calls per round: a slow producer must not stall everyone else's checks. */
export const CHECK_CONCURRENCY = 8;
/** Extra lease beyond a call's own timeout before a claimed check is due again. */
const CLAIM_MARGIN_MS = 5_000;

export interface CheckBackResult {
  checked: number;
  committed: number;
  rolledBack: number;
  unanswered: number;
  dead: number;
}

/**
 * One bounded round of the check-back timer (docs/txmsg.md "Check-back"): asks the producer of every
 * PREPARED message whose check is due what became of its local transaction. Three phases so no
 * call ever runs inside a transaction: claim (short tx) → call (no tx) → record (short tx each).
 * The sweep role calls this; at most MSGX_TX_REDELIVERY_BATCH messages per round.
 */
export async function checkBackOnce(ctx: Pick<AppContext, 'db' | 'clock' | 'config' | 'log'>): Promise<CheckBackResult> {
  const { checkAllowedOrigins, redeliveryBatch } = ctx.config.txmsg;
  const claimed = await claimDueChecks(ctx.db, ctx.clock.now(), redeliveryBatch, CLAIM_MARGIN_MS);
  const result: CheckBackResult = { checked: 0, committed: 0, rolledBack: 0, unanswered: 0, dead: 0 };
  const outcomes = await mapLimit(claimed, CHECK_CONCURRENCY, (row) =>
    callCheckBack(row, { allowedOrigins: checkAllowedOrigins, signingSecret: ctx.config.signingSecret }),
  );
  for (const [i, row] of claimed.entries()) {
    const outcome = await record(ctx, row.id, outcomes[i]!);
    result.checked++;
    if (outcome) result[outcome]++;
  }
  if (result.checked) ctx.log.info('txmsg check-back round', { ...result });
  return result;
}

/** How long a check-back may take, as the sweep gives it: its share of the step, and the invocation's end. */
export interface CheckBackShare {
  /** performance.now() by which run() returns; calls still out go on beside the next tasks. */
  until: number;
  /** performance.now() past which no call may wait (the invocation's end); none in the twin. */
  callsEnd?: number;
}

/**
 * The check-back as the sweep runs it: bounded by time, not count. At most CHECK_CONCURRENCY calls
 * are out at once, topped up from the due messages as calls finish, and run() waits for them only
 * until its share of the step ends: a producer that never answers holds up its own messages, not
 * redelivery, reconcile, archiving or the gauges behind it. A call that is still out keeps its
 * claim (its own timeout plus a margin) and is recorded when it ends; no call outlives the
 * invocation (`callsEnd`: one cut there counts as unanswered). drain() waits for the calls out.
 */
export function checkBackRunner(ctx: Pick<AppContext, 'db' | 'clock' | 'config' | 'log'>) {
  const out = new Set<Promise<void>>();
  let tally: CheckBackResult = { checked: 0, committed: 0, rolledBack: 0, unanswered: 0, dead: 0 };
  const start = (row: TxRow, callsEnd: number | undefined) => {
    const leftMs = callsEnd === undefined ? Number.POSITIVE_INFINITY : Math.max(1, Math.floor(callsEnd - performance.now()));
    const call = callCheckBack(
      { ...row, check_timeout_ms: Math.min(row.check_timeout_ms, leftMs) },
      { allowedOrigins: ctx.config.txmsg.checkAllowedOrigins, signingSecret: ctx.config.signingSecret },
    );
    const p: Promise<void> = call
      .then((outcome) => record(ctx, row.id, outcome))
      .then((outcome) => {
        tally.checked++;
        if (outcome) tally[outcome]++;
      })
      .catch((err: unknown) => ctx.log.error('txmsg check-back not recorded; the check is due again', { id: row.id, error: err as Error }))
      .finally(() => out.delete(p));
    out.add(p);
  };
  return {
    async run(share: CheckBackShare): Promise<CheckBackResult> {
      while (performance.now() < share.until) {
        const free = Math.min(CHECK_CONCURRENCY - out.size, ctx.config.txmsg.redeliveryBatch);
        const claimed = free > 0 ? await claimDueChecks(ctx.db, ctx.clock.now(), free, CLAIM_MARGIN_MS) : [];
        for (const row of claimed) start(row, share.callsEnd);
        if (out.size === 0) break;
        // Until one call ends (a free slot) or the share does.
        if (!(await raceUntil([...out], share.until))) break;
      }
      const done = tally;
      tally = { checked: 0, committed: 0, rolledBack: 0, unanswered: 0, dead: 0 };
      if (done.checked || out.size) ctx.log.info('txmsg check-back round', { ...done, stillOut: out.size });
      return done;
    },
    /** Waits for every call still out (the end of an invocation). */
    async drain(): Promise<void> {
      await Promise.all([...out]);
    },
  };
}

/** True when one of `ps` settled before `until` (performance.now()), false when the time ran out first. */
async function raceUntil(ps: Promise<unknown>[], until: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((r) => (timer = setTimeout(() => r(false), Math.max(0, until - performance.now()))));
  try {
    return await Promise.race([Promise.race(ps).then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

async function record(
  ctx: Pick<AppContext, 'db' | 'clock' | 'config'>,
  id: string,
  outcome: CheckOutcome,
): Promise<'committed' | 'rolledBack' | 'unanswered' | 'dead' | undefined> {
  const { checkMax, checkIntervalMs, redeliveryScheduleMs } = ctx.config.txmsg;
  return ctx.db.tx(async (tx) => {
    const now = ctx.clock.now();
    const locked = await lockMessage(tx, id);
    if (!locked) return undefined;
    const answer = 'answer' in outcome ? outcome.answer : undefined;
    const detail = { check: locked.checks + 1, answer: answer ?? null, error: 'error' in outcome ? outcome.error : null, ms: outcome.ms };
    if (locked.status !== 'PREPARED') {
      // The producer's own commit/rollback arrived while we were asking: it already decided.
      await appendTrace(tx, id, now, 'check', locked.status, { ...detail, note: 'settled meanwhile' });
      return undefined;
    }
    const row = await updateMessage(tx, id, {
      checks: locked.checks + 1,
      last_error: 'error' in outcome ? outcome.error : answer === 'UNKNOWN' ? 'producer answered UNKNOWN' : null,
      updated_at: now,
    });
    await appendTrace(tx, id, now, 'check', row.status, detail);
    if (answer === 'COMMIT') {
      await applyAction(tx, row, 'commit', now, redeliveryScheduleMs, { via: 'check-back' });
      return 'committed';
    }
    if (answer === 'ROLLBACK') {
      await applyAction(tx, row, 'rollback', now, redeliveryScheduleMs, { via: 'check-back' });
      return 'rolledBack';
    }
    if (row.checks >= checkMax) {
      await move(
        tx,
        row,
        'checks-exhausted',
        now,
        {
          next_check_at: null,
          dead_phase: 'check',
          dead_reason: 'check-back exhausted',
        },
        { detail: { checks: row.checks, lastError: row.last_error } },
      );
      return 'dead';
    }
    await updateMessage(tx, id, { next_check_at: new Date(now.getTime() + checkIntervalMs) });
    return 'unanswered';
  });
}

/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
