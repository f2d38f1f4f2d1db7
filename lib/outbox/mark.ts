import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import type { Outcome, RowUpdate } from './decide.ts';
import type { DispatchContext, DispatchOptions, SentEvent } from './types.ts';
import { round, type TargetReport } from './report.ts';

/* Recording a batch's outcome: one call per batch, only on rows still leased by us, with the
 * onSent/onDead hooks in the same transaction so their effects commit with the marks. */

// One call records a whole batch: every row's new state and every publisher outcome (migration 004, as 009 left it).
const MARK_SQL = prepared(
  `SELECT event_id, status, source_kind, source_id
   FROM msgx_outbox_mark($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
);

/** Marks one batch and counts the result into the report; rows whose lease we lost are not ours to count. */
export async function markRun(
  ctx: DispatchContext,
  target: string,
  batch: { updates: RowUpdate[]; outcomes: Outcome[]; sources: (string | null)[] },
  now: Date,
  me: string,
  options: DispatchOptions,
  report: TargetReport,
): Promise<void> {
  const { updates, outcomes } = batch;
  const hooked = options.hookSources ? batch.sources.some((s) => s !== null && options.hookSources!.includes(s)) : true;
  const t2 = performance.now();
  const marked = await mark(ctx, updates, outcomes, now, me, hooked ? options : {});
  report.markMs = round(report.markMs + performance.now() - t2);
  const lost = updates.length - marked.length;
  report.lostLease += lost;
  const byId = new Map(updates.map((u) => [u.id, u]));
  for (const m of marked) {
    if (m.status === 'SENT') report.sent++;
    else if (m.status === 'DEAD') report.dead++;
    else if (byId.get(m.event_id)?.error) report.retried++;
    else report.released++;
  }
  for (const u of updates) {
    if (u.status === 'DEAD' && !u.sentAs)
      ctx.log.error({ message: 'outbox_event_dead', target: target, eventId: u.id, attempts: u.attempts, error: u.error });
    else if (u.status === 'PENDING' && u.error)
      ctx.log.warn({
        message: 'outbox_event_retry',
        target: target,
        eventId: u.id,
        attempts: u.attempts,
        nextAttemptAt: u.nextAt?.toISOString(),
        error: u.error,
      });
  }
  if (lost > 0) ctx.log.warn({ message: 'outbox_lease_lost', target: target, rows: lost });
}

/** The mark statement, with the hooks told which of our rows settled SENT or DEAD. */
async function mark(
  ctx: DispatchContext,
  updates: RowUpdate[],
  outcomes: Outcome[],
  now: Date,
  me: string,
  options: DispatchOptions,
): Promise<{ event_id: number; status: string; source_kind: string | null; source_id: string | null }[]> {
  const params = [
    updates.map((u) => u.id),
    updates.map((u) => u.status),
    updates.map((u) => u.attempts),
    updates.map((u) => u.nextAt),
    updates.map((u) => u.error),
    updates.map((u) => u.sentAs),
    now,
    me,
    outcomes.map((o) => o.id),
    outcomes.map((o) => o.publisher),
    outcomes.map((o) => (o.ok ? 'ok' : 'failed')),
    outcomes.map((o) => o.partition),
    outcomes.map((o) => o.offset),
    outcomes.map((o) => o.error),
    updates.map((u) => !!u.stalled),
  ];
  type Row = { event_id: number; status: string; source_kind: string | null; source_id: string | null };
  const run = async (q: Queryable) => {
    const rows = (await q.query<Row>(MARK_SQL, params)).rows;
    const pick = (status: string): SentEvent[] =>
      rows
        .filter((r) => r.status === status)
        .sort((a, b) => a.event_id - b.event_id)
        .map((r) => ({ eventId: r.event_id, sourceKind: r.source_kind ?? 'external', sourceId: r.source_id }));
    if (options.onSent) {
      const sent = pick('SENT');
      if (sent.length) await options.onSent(q, sent, now);
    }
    if (options.onDead) {
      const dead = pick('DEAD');
      if (dead.length) await options.onDead(q, dead, now);
    }
    if (options.onRetry) {
      const errors = new Map(updates.filter((u) => u.status === 'PENDING' && u.error).map((u) => [u.id, u.error!]));
      const retried = pick('PENDING')
        .filter((e) => errors.has(e.eventId))
        .map((e) => ({ ...e, error: errors.get(e.eventId)! }));
      if (retried.length) await options.onRetry(q, retried, now);
    }
    return rows;
  };
  // One statement is atomic on its own; a transaction only when hooks join it (none when the batch
  // has no event of the kinds they act on, DispatchOptions.hookSources).
  return options.onSent || options.onDead || options.onRetry ? ctx.db.tx(run) : run(ctx.db);
}
