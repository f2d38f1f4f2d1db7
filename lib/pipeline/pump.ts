import type { AppContext } from '../shared/context.ts';
import { asMsgxError } from '../shared/errors.ts';
import { type Prepared, prepare } from './attempt.ts';
import { backfillNow, noteFor } from './backfill.ts';
import { applyGroup, type GroupResult, record } from './group.ts';
import { type OpenRow, readHead, writeAttempts } from './procState.ts';

export type PumpStep =
  | { kind: 'processed'; count: number; stopped: boolean }
  | { kind: 'idle' }
  | { kind: 'paused' }
  | { kind: 'waiting'; untilMs: number; msgId: number };

/**
 * One step of the FIFO pump: the smallest open message is the head (PENDING and FAILED both hold
 * it). A FAILED head not yet due makes the pump wait; otherwise the head and the due run behind it
 * are applied in one transaction. The caller holds the pump's advisory lock.
 */
export async function pumpOnce(ctx: AppContext): Promise<PumpStep> {
  const now = ctx.clock.now();
  const { paused, rows } = await readHead(ctx.db, ctx.config.pipeline.groupCommit);
  if (paused) return { kind: 'paused' };
  const head = rows[0];
  if (!head) return { kind: 'idle' };
  if (head.status === 'FAILED' && head.next_attempt_at.getTime() > now.getTime())
    return { kind: 'waiting', untilMs: head.next_attempt_at.getTime(), msgId: head.msg_id };

  // Only the head may be FAILED: behind it everything is PENDING (nothing overtakes a failure).
  const run = rows.filter((r, i) => i === 0 || r.status === 'PENDING');
  const firstGap = run.findIndex((r, i) => i > 0 && r.status !== 'PENDING');
  const group = firstGap > 0 ? run.slice(0, firstGap) : run;

  let prepared: Prepared[];
  try {
    prepared = await prepareGroup(ctx, group);
  } catch (err) {
    // A mailbox read error is INFRA, never "missing": the head waits for its backoff.
    await failHead(ctx, head, asMsgxError(err).message, now);
    return { kind: 'processed', count: 1, stopped: true };
  }

  const committed = await commitGroup(ctx, prepared, now);
  if ('error' in committed) {
    await failHead(ctx, head, `transaction failed: ${committed.error}`, now).catch(() => {});
    return { kind: 'processed', count: 0, stopped: true };
  }
  const result = committed.result;
  await backfillNow(ctx, result.marks, now);
  return { kind: 'processed', count: result.records.length, stopped: result.stopped };
}

/**
 * Commits the group with deferred writes (the fast path). If that transaction fails — a deferred
 * write failed at the end of the group, where no single message can be blamed — the group runs
 * again with every write inside its own message's savepoint, so the failing message fails alone.
 * An error when even that fails (commit failed, connection lost): nothing of the group applied.
 */
async function commitGroup(ctx: AppContext, prepared: Prepared[], now: Date): Promise<{ result: GroupResult } | { error: string }> {
  try {
    return { result: await ctx.db.tx((tx) => applyGroup(ctx, tx, prepared, now)) };
  } catch (first) {
    ctx.log.warn('pump group failed; retrying it message by message', { head: prepared[0]?.msgId, error: String(first) });
  }
  try {
    return { result: await ctx.db.tx((tx) => applyGroup(ctx, tx, prepared, now, { deferWrites: false })) };
  } catch (err) {
    ctx.log.warn('pump transaction failed', { head: prepared[0]?.msgId, error: String(err) });
    return { error: asMsgxError(err).message };
  }
}

async function prepareGroup(ctx: AppContext, group: OpenRow[]): Promise<Prepared[]> {
  const missing = group.filter((r) => r.raw_text === null).map((r) => r.msg_id);
  const texts = missing.length ? await ctx.mailbox.readTexts(missing) : new Map<number, string>();
  const { timezone } = ctx.config;
  const maxBytes = ctx.config.http.maxBodyBytes;
  return group.map((r) => prepare(r.msg_id, r.raw_text ?? texts.get(r.msg_id), timezone, maxBytes));
}

/** Records an INFRA attempt on the head (or its EXHAUSTED death) in a transaction of its own. */
async function failHead(ctx: AppContext, head: OpenRow, reason: string, now: Date): Promise<void> {
  const error = asMsgxError(reason);
  const item: Prepared = { msgId: head.msg_id, rawText: head.raw_text, error };
  const rec = record(head, { status: 'FAILED', errorClass: 'INFRA', detail: reason }, head.identity_key, item, now, now, ctx.config);
  const marks =
    rec.status === 'DEAD' && !ctx.config.shadow
      ? [{ id: rec.msgId, status: rec.status, note: noteFor(rec.status, rec.errorClass, rec.errorDetail, null), processedAt: now }]
      : [];
  await writeAttempts(ctx.db, [rec], marks);
  await backfillNow(ctx, marks, now);
}
