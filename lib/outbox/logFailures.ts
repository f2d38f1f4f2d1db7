import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import { addResults, BatchLog, batchLogCte } from './batchLog.ts';
import { RELEASE_SQL, toClaimed, type LogRow } from './logLease.ts';
import { publishRun } from './publish.ts';
import type { TargetReport } from './report.ts';
import { backoffMs, type DeliverySettings } from './settings.ts';
import type { ClaimedRow, DispatchContext, DispatchOptions, Publisher, PublishResult, SentEvent } from './types.ts';

// Failures of the log relay, kept per event in outbox_exception: verdicts, charges, due heads.

// The due head of each key among a target's exceptions (nothing overtakes an earlier event of its key).
export const HEADS_SQL = prepared(`
SELECT x.event_id, x.attempts, array_to_string(x.delivered_to, ',') AS delivered_to, m.partition_key, m.event_type, m.value,
       m.headers, m.source_kind, m.source_id, m.flid, m.state_version
FROM outbox_exception x JOIN msg_event m ON m.event_id = x.event_id
WHERE x.target = $1 AND NOT x.dead AND NOT x.at_head AND x.next_attempt_at <= $2
  AND NOT EXISTS (SELECT 1 FROM outbox_exception y WHERE y.target = $1 AND NOT y.dead AND NOT y.at_head AND y.event_id < x.event_id
                  AND y.partition_key IS NOT DISTINCT FROM x.partition_key)
ORDER BY x.event_id LIMIT $3`);

export const SETTLE_SQL = prepared(`
WITH d AS (DELETE FROM outbox_exception WHERE target = $1 AND event_id = ANY($2::bigint[])),
u AS (
  UPDATE outbox_exception x SET attempts = v.attempts, next_attempt_at = v.next_at, last_error = v.err, dead = v.dead,
    delivered_to = string_to_array(v.dto, ','), updated_at = $8::timestamptz
  FROM unnest($3::bigint[], $4::int[], $5::timestamptz[], $6::text[], $7::boolean[], $9::text[]) AS v(id, attempts, next_at, err, dead, dto)
  WHERE x.target = $1 AND x.event_id = v.id),
${batchLogCte('b', 12, { target: '$1', at: '$8' })}
UPDATE outbox_target SET hold_until = $10::timestamptz, stalled_since = CASE WHEN $10 IS NULL THEN NULL ELSE coalesce(stalled_since, $8) END,
  last_error = $11::text
WHERE target = $1`);

export const KEYS_SQL = prepared(`SELECT DISTINCT partition_key FROM outbox_exception WHERE target = $1 AND NOT dead AND NOT at_head`);

/** A new exception row (or an exception's next state). */
export interface Exc {
  id: number;
  attempts: number;
  nextAt: Date | null;
  error: string | null;
  dead: boolean;
  key: string | null;
  deliveredTo: string[];
  atHead?: boolean;
}

/** What one event's results say: taken by all, not this event's fault (outage, not tried), or charged. */
export type Verdict = { kind: 'ok' } | { kind: 'outage' | 'untried'; error: string } | { kind: 'charged'; error: string; took: string[] };

export function verdictOf(pubs: Publisher[], per: PublishResult[]): Verdict {
  const failed = pubs.map((p, j) => ({ p, r: per[j]! })).filter((x) => !x.r.ok);
  if (failed.length === 0) return { kind: 'ok' };
  const error = failed.map((x) => `${x.p.name}: ${(x.r as { error: string }).error}`).join('; ');
  const bad = failed.filter((x) => !(x.r as { notAttempted?: boolean }).notAttempted);
  if (bad.length === 0) return { kind: 'untried', error };
  if (bad.every((x) => (x.r as { unavailable?: boolean }).unavailable)) return { kind: 'outage', error };
  return { kind: 'charged', error, took: pubs.filter((_, j) => per[j]!.ok).map((p) => p.name) };
}

export function charge(settings: DeliverySettings, now: Date, row: ClaimedRow, error: string, took: string[]): Exc {
  const attempts = row.attempts + 1;
  const dead = attempts >= settings.maxRetryCount;
  return {
    id: row.event_id,
    attempts,
    nextAt: dead ? null : new Date(now.getTime() + backoffMs(settings, attempts)),
    error,
    dead,
    key: row.partition_key,
    deliveredTo: [...new Set([...(row.delivered_to ?? []), ...took])],
  };
}

/** Retries the due heads of a target's exceptions once; what it found. */
export async function retryHeads(
  ctx: DispatchContext,
  pubs: Publisher[],
  target: string,
  settings: DeliverySettings,
  me: string,
  options: DispatchOptions,
  report: TargetReport,
): Promise<'idle' | 'more' | 'stalled'> {
  const isSchd = target === 'schd';
  const now = ctx.clock.now();
  const heads = (await ctx.db.query<LogRow>(HEADS_SQL, [target, now, settings.batchSize])).rows.map((r) => {
    const c = toClaimed(r, isSchd);
    c.newest_id = c.event_id;
    return c;
  });
  if (heads.length === 0) return 'idle';
  report.claimed += heads.length;
  const out = await publishRun(ctx, pubs, target, settings, heads, report);
  const done: number[] = [];
  const next: Exc[] = [];
  const sent: ClaimedRow[] = [];
  const dead: ClaimedRow[] = [];
  const retried: (ClaimedRow & { error: string })[] = [];
  let hold: { error: string } | null = null;
  out.rows.forEach((r, i) => {
    const v = verdictOf(
      pubs,
      out.results.map((rs) => rs[i]!),
    );
    if (v.kind === 'ok') {
      done.push(r.event_id);
      sent.push(r);
    } else if (v.kind === 'charged') {
      const e = charge(settings, now, r, v.error, v.took);
      next.push(e);
      if (e.dead) dead.push(r);
      else retried.push({ ...r, error: v.error });
    } else if (v.kind === 'outage') hold ??= { error: v.error };
  });
  const taken = new BatchLog();
  addResults(taken, pubs, out.rows, new Map(out.rows.map((r, i) => [r.event_id, out.results.map((rs) => rs[i]!)])));
  const holdUntil = hold ? new Date(now.getTime() + settings.initialBackoffMs) : null;
  await settle(ctx, options, now, { sent, dead, retried }, async (q) => {
    await q.query(SETTLE_SQL, [
      target,
      done,
      next.map((e) => e.id),
      next.map((e) => e.attempts),
      next.map((e) => e.nextAt),
      next.map((e) => e.error),
      next.map((e) => e.dead),
      now,
      next.map((e) => e.deliveredTo.join(',')),
      holdUntil,
      hold?.error ?? null,
      ...taken.params(),
    ]);
    return true;
  });
  report.sent += sent.length;
  report.dead += dead.length;
  report.retried += retried.length;
  logFailures(ctx, target, next, hold);
  if (hold) {
    await ctx.db.query(RELEASE_SQL, [target, me]);
    return 'stalled';
  }
  return done.length > 0 ? 'more' : 'idle';
}

/** The write of an outcome, with the hooks in its transaction when they act on one of its events. */
export async function settle(
  ctx: DispatchContext,
  options: DispatchOptions,
  now: Date,
  o: { sent: ClaimedRow[]; dead: ClaimedRow[]; retried: (ClaimedRow & { error: string })[] },
  write: (q: Queryable) => Promise<boolean>,
): Promise<boolean> {
  const all = [...o.sent, ...o.dead, ...o.retried];
  const hooked =
    (options.onSent || options.onDead || options.onRetry) &&
    (options.hookSources ? all.some((r) => r.source_kind !== null && options.hookSources!.includes(r.source_kind)) : all.length > 0);
  if (!hooked) return write(ctx.db);
  const ev = (r: ClaimedRow): SentEvent => ({ eventId: r.event_id, sourceKind: r.source_kind ?? 'external', sourceId: r.source_id });
  return ctx.db.tx(async (q) => {
    if (!(await write(q))) return false;
    if (options.onSent && o.sent.length) await options.onSent(q, o.sent.map(ev), now);
    if (options.onDead && o.dead.length) await options.onDead(q, o.dead.map(ev), now);
    if (options.onRetry && o.retried.length)
      await options.onRetry(
        q,
        o.retried.map((r) => ({ ...ev(r), error: r.error })),
        now,
      );
    return true;
  });
}

export function logFailures(
  ctx: DispatchContext,
  target: string,
  exceptions: Exc[],
  hold: { error: string; stalled?: boolean } | null,
): void {
  for (const e of exceptions) {
    if (e.dead) ctx.log.error({ message: 'outbox_event_dead', target, eventId: e.id, attempts: e.attempts, error: e.error });
    else if (e.error)
      ctx.log.warn({
        message: 'outbox_event_retry',
        target,
        eventId: e.id,
        attempts: e.attempts,
        nextAttemptAt: e.nextAt?.toISOString(),
        error: e.error,
      });
  }
  if (hold && hold.stalled !== false) ctx.log.warn({ message: 'outbox_target_stalled', target, error: hold.error });
}
