import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import type { BackfillMark } from '../mailbox/mailbox.ts';
import type { AppContext } from '../app/context.ts';
import { backoffMs } from '../shared/backoff.ts';
import { TERMINAL_STATUSES } from './states.ts';

/**
 * Back-filling the mailbox closes the loop with its owner. The intent (a backfill_todo row) is
 * written in the same transaction as the terminal state, so a crash after commit loses nothing:
 * the sweep finds the todo. A reconcile pass also heals rows whose todo went missing.
 */

export interface TodoRow {
  msg_id: number;
  proc_status: string;
  proc_note: string | null;
  processed_at: Date;
  attempts: number;
}

/** A message's open backfill intent, if any (for its trace). */
export async function todoOf(q: Queryable, msgId: number) {
  const r = await q.query<{
    proc_status: string;
    proc_note: string | null;
    processed_at: Date;
    attempts: number;
    next_attempt_at: Date;
    last_error: string | null;
  }>(`SELECT proc_status, proc_note, processed_at, attempts, next_attempt_at, last_error FROM backfill_todo WHERE msg_id = $1`, [msgId]);
  return r.rows[0];
}

/**
 * Back-fills that failed at least once and are still owed (attempts > 0): above zero for a while
 * means the mailbox refuses our writes (a gauge, docs/deploy.md "Alarms").
 */
export async function failingBackfills(q: Queryable): Promise<number> {
  const r = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM backfill_todo WHERE attempts > 0`);
  return r.rows[0]!.n;
}

export async function insertTodos(q: Queryable, marks: BackfillMark[], now: Date): Promise<void> {
  if (marks.length === 0) return;
  await q.query(
    `INSERT INTO backfill_todo (msg_id, proc_status, proc_note, processed_at, next_attempt_at)
     SELECT v.id, v.status, v.note, v.at, $5 FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[]) AS v(id, status, note, at)
     ON CONFLICT (msg_id) DO UPDATE SET proc_status = EXCLUDED.proc_status, proc_note = EXCLUDED.proc_note,
       processed_at = EXCLUDED.processed_at, attempts = 0, next_attempt_at = EXCLUDED.next_attempt_at, last_error = NULL`,
    [marks.map((m) => m.id), marks.map((m) => m.status), marks.map((m) => m.note), marks.map((m) => m.processedAt), now],
  );
}

/** Right after commit: write the marks, then drop their todos. A failure leaves the todos due later. */
export async function backfillNow(
  ctx: Pick<AppContext, 'db' | 'mailbox' | 'config' | 'log'>,
  marks: BackfillMark[],
  now: Date,
): Promise<boolean> {
  if (marks.length === 0) return true;
  try {
    await ctx.mailbox.markProcessed(marks);
  } catch (err) {
    const retries = await postponeTodos(
      ctx.db,
      marks.map((m) => m.id),
      String(err),
      now,
      ctx.config.pipeline,
    ).catch(() => []);
    // README "Operations" (Logs): which messages, the class, how many attempts so far and when the next is due.
    ctx.log.warn({
      message: 'mailbox backfill failed; the sweep will retry',
      error_class: 'INFRA',
      error: String(err),
      ids: marks.map((m) => m.id),
      retries: retries.map((r) => ({ msg_id: r.msgId, attempt: r.attempts, next_attempt_at: r.nextAttemptAt.toISOString() })),
    });
    return false;
  }
  await ctx.db.query(prepared(`DELETE FROM backfill_todo WHERE msg_id = ANY($1::bigint[])`), [marks.map((m) => m.id)]);
  return true;
}

async function postponeTodos(
  q: Queryable,
  ids: number[],
  error: string,
  now: Date,
  p: { backfillInitialMs: number; backfillMaxMs: number },
): Promise<{ msgId: number; attempts: number; nextAttemptAt: Date }[]> {
  // Per-row backoff: 30 s doubling to 15 min by default.
  const r = await q.query<{ msg_id: number; attempts: number }>(
    `UPDATE backfill_todo SET attempts = attempts + 1, last_error = $2 WHERE msg_id = ANY($1::bigint[]) RETURNING msg_id, attempts`,
    [ids, error.slice(0, 1000)],
  );
  const out = r.rows.map((x) => ({
    msgId: x.msg_id,
    attempts: x.attempts,
    nextAttemptAt: new Date(now.getTime() + backoffMs(x.attempts, p.backfillInitialMs, p.backfillMaxMs)),
  }));
  await q.query(
    `UPDATE backfill_todo t SET next_attempt_at = v.at FROM unnest($1::bigint[], $2::timestamptz[]) AS v(id, at) WHERE t.msg_id = v.id`,
    [out.map((x) => x.msgId), out.map((x) => x.nextAttemptAt)],
  );
  return out;
}

/** Retries due todos in bounded batches. Returns how many were written to the mailbox. */
export async function backfillSweep(ctx: Pick<AppContext, 'db' | 'mailbox' | 'config' | 'log' | 'clock'>, limit = 200): Promise<number> {
  if (ctx.config.shadow) return 0;
  const now = ctx.clock.now();
  const due = await ctx.db.query<TodoRow>(
    `SELECT msg_id, proc_status, proc_note, processed_at, attempts FROM backfill_todo
     WHERE next_attempt_at <= $1 ORDER BY msg_id LIMIT $2`,
    [now, limit],
  );
  if (due.rowCount === 0) return 0;
  const marks = due.rows.map(toMark);
  return (await backfillNow(ctx, marks, now)) ? marks.length : 0;
}

/**
 * Heals the crash windows of the mailbox back-fill (docs/architecture.md "An inbound message"): a terminal proc_state row whose mailbox row is still
 * unprocessed and that has no todo (the todo was lost, or deleted by hand) gets its todo back.
 */
export async function reconcileBackfill(ctx: Pick<AppContext, 'db' | 'mailbox' | 'config' | 'clock'>, scanLimit = 500): Promise<number> {
  if (ctx.config.shadow) return 0;
  const unprocessed = await ctx.mailbox.scanUnprocessed(0, scanLimit);
  if (unprocessed.length === 0) return 0;
  const r = await ctx.db.query<{ msg_id: number; status: string; note: string | null; finished_at: Date }>(
    `SELECT p.msg_id, p.status, ${NOTE_SQL} AS note, COALESCE(p.finished_at, p.updated_at) AS finished_at
     FROM proc_state p
     WHERE p.msg_id = ANY($1::bigint[]) AND p.status = ANY($2::text[])
       AND NOT EXISTS (SELECT 1 FROM backfill_todo t WHERE t.msg_id = p.msg_id)`,
    [unprocessed.map((u) => u.id), TERMINAL_STATUSES],
  );
  await insertTodos(
    ctx.db,
    r.rows.map((x) => ({ id: x.msg_id, status: x.status, note: x.note, processedAt: x.finished_at })),
    ctx.clock.now(),
  );
  return r.rowCount;
}

/** PROC_NOTE: the error class and reason for DEAD, the reason for SKIPPED. */
export const NOTE_SQL = `CASE WHEN p.status = 'DEAD' THEN p.error_class || ': ' || COALESCE(p.error_detail, '') ELSE p.note END`;

export function noteFor(status: string, errorClass: string | null, detail: string | null, note: string | null): string | null {
  return status === 'DEAD' ? `${errorClass}: ${detail ?? ''}` : note;
}

const toMark = (t: TodoRow): BackfillMark => ({ id: t.msg_id, status: t.proc_status, note: t.proc_note, processedAt: t.processed_at });
