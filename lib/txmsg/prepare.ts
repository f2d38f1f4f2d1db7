import { randomUUID } from 'node:crypto';
import type { AppContext } from '../app/context.ts';
import { TxIdempotencyConflictError, TxValidationError } from './errors.ts';
import { claimKey, requestHash } from './idempotency.ts';
import { findMessage, insertMessage, type TxRow } from './store.ts';
import { checkTxTopic } from './topics.ts';
import { appendTrace } from './trace.ts';
import { parsePrepare } from './validate.ts';

export interface PrepareResult {
  row: TxRow;
  /** false when an Idempotency-Key returned an earlier message (HTTP 200 instead of 201). */
  created: boolean;
  /** Where the time went (ms), for the command's timing line (lib/txmsg/timing.ts). */
  phases: { validate_ms: number; topic_check_ms: number; store_ms: number };
}

/**
 * Stores a half message (PREPARED): invisible to consumers until committed. Its first check-back
 * is due `checkAfterMs` later, which heals every producer-side failure (docs/txmsg.md "Check-back").
 */
export async function prepare(
  ctx: Pick<AppContext, 'db' | 'clock' | 'config'>,
  body: unknown,
  idempotencyKey?: string,
): Promise<PrepareResult> {
  const t0 = performance.now();
  const p = parsePrepare(body, ctx.config.txmsg.checkAllowedOrigins);
  if (idempotencyKey !== undefined && (idempotencyKey.length === 0 || idempotencyKey.length > 200))
    throw new TxValidationError('Idempotency-Key', 'must be 1 to 200 characters');
  // A topic msgx could never deliver to is refused now, not discovered by retrying later.
  const t1 = performance.now();
  await checkTxTopic(ctx.config, p.topic);
  const t2 = performance.now();
  const now = ctx.clock.now();
  const id = randomUUID();
  const hash = requestHash(p);
  const outcome = await ctx.db.tx(async (tx) => {
    if (idempotencyKey !== undefined) {
      const earlier = await claimKey(tx, idempotencyKey, id, hash, now);
      if (earlier) {
        if (earlier.request_hash !== hash) throw new TxIdempotencyConflictError(idempotencyKey, earlier.tx_id);
        return { earlierId: earlier.tx_id, row: undefined };
      }
    }
    const row = await insertMessage(tx, {
      id,
      topic: p.topic,
      msg_key: p.key ?? null,
      payload: typeof p.payload === 'string' ? p.payload : JSON.stringify(p.payload),
      headers: p.headers ?? {},
      check_url: p.checkUrl,
      check_after_ms: p.checkAfterMs,
      check_timeout_ms: p.checkTimeoutMs,
      next_check_at: new Date(now.getTime() + p.checkAfterMs),
      created_at: now,
      biz_name: p.bizName ?? null,
      created_by: p.createdBy ?? null,
    });
    await appendTrace(tx, id, now, 'prepare', 'PREPARED', {
      topic: p.topic,
      key: p.key ?? null,
      idempotencyKey: idempotencyKey ?? null,
      bizName: p.bizName ?? null,
      createdBy: p.createdBy ?? null,
    });
    return { earlierId: undefined, row };
  });
  const phases = () => ({ validate_ms: ms(t1 - t0), topic_check_ms: ms(t2 - t1), store_ms: ms(performance.now() - t2) });
  if (outcome.row) return { row: outcome.row, created: true, phases: phases() };
  const row = await findMessage(ctx.db, outcome.earlierId);
  if (!row) throw new Error(`Idempotency-Key ${idempotencyKey} points at missing message ${outcome.earlierId}`);
  return { row, created: false, phases: phases() };
}

const ms = (x: number) => Math.round(x * 10) / 10;
