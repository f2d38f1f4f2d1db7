import type { AppContext } from '../app/context.ts';
import { applyAction } from './actions.ts';
import { callCheckBack, type CheckOutcome } from './checkCall.ts';
import { move } from './move.ts';
import { claimDueChecks, lockMessage, updateMessage } from './store.ts';
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
