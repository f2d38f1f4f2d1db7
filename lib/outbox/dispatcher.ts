import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Config } from '../config/config.ts';
import type { Db, Queryable } from '../db/db.ts';
import type { Log } from '../observability/logger.ts';
import type { Clock } from '../shared/clock.ts';
import { OUTBOX_CHANNEL } from './enqueue.ts';
import type { OutboxMetrics } from './metrics.ts';
import { noopMetrics } from './metrics.ts';
import { backoffMs, deliverySettingsFor, type DeliverySettings } from './settings.ts';
import type { OutRecord, Publisher, PublishResult } from './types.ts';
import { HEADER_EVENT_ID, HEADER_EVENT_TYPE } from './types.ts';

/*
 * The outbox relay (issue 4, seed 000 §5, seed 001). One round = for every target with open
 * events: claim the head run as a lease, publish it outside any transaction, record the outcome.
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

export type DispatchContext = { db: Db; config: Config; clock: Clock; log: Log };

export interface SentEvent {
  eventId: number;
  sourceKind: string;
  sourceId: string | null;
}

export type OutcomeHook = (tx: Queryable, events: SentEvent[], now: Date) => Promise<void>;

export interface DispatchOptions {
  /** Written to locked_by; one per dispatcher instance. Default: host:pid:random of this process. */
  dispatcherId?: string;
  /** Called in the transaction that marks events SENT (txmsg moves tx_message to DELIVERED). */
  onSent?: OutcomeHook;
  /** Called in the transaction that marks events DEAD. */
  onDead?: OutcomeHook;
  metrics?: OutboxMetrics;
  /** Only these targets this round (default: every target with open events). */
  targets?: string[];
  /**
   * Batches per target per round while batches come back full (default 1). A loop passes more:
   * the following claims skip discovery, which keeps the database round trips per batch at two.
   */
  maxBatches?: number;
}

export interface TargetReport {
  target: string;
  /** Why nothing was claimed: another dispatcher holds it, its head is backing off, or the schd period is not over. */
  skipped?: 'locked' | 'leased' | 'backoff' | 'flush-period' | 'error';
  claimed: number;
  /** Records handed to the publishers (schd: one per FLID). */
  published: number;
  sent: number;
  retried: number;
  dead: number;
  released: number;
  /** The last batch was full: more may be waiting. */
  full?: boolean;
  /** Rows whose lease we had lost by the time we marked them (someone else delivers them). */
  lostLease: number;
  oldestPendingSeconds: number;
  claimMs: number;
  publishMs: Record<string, number>;
  markMs: number;
  error?: string;
}

export interface DispatchReport {
  targets: TargetReport[];
  sent: number;
  retried: number;
  dead: number;
  /** A target claimed a full batch: call again at once instead of waiting for the poll interval. */
  more: boolean;
  discoverMs: number;
  totalMs: number;
}

const PROCESS_DISPATCHER_ID = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

/** The Kafka topic of a target: 'msg' and 'schd' from config, 'tx:<topic>' names its own. */
export function topicForTarget(config: Pick<Config, 'outbox' | 'shadow'>, target: string): string | null {
  if (target === 'msg') return config.outbox.topicMsg;
  if (target === 'schd') return config.outbox.topicSchd;
  if (target.startsWith('tx:') && target.length > 3) return target.slice(3) + (config.shadow ? '.shadow' : '');
  return null;
}

interface HeadRow {
  target: string;
  event_id: number;
  status: string;
  lock_until: Date | null;
  next_attempt_at: Date;
  created_at: Date;
  last_flush_at: Date | null;
}

// A loose index scan over msg_event_open: one probe per target, however long the backlog is.
const DISCOVER_SQL = `
WITH RECURSIVE t AS (
  (SELECT target FROM msg_event WHERE status IN ('PENDING', 'DELIVERING') ORDER BY target LIMIT 1)
  UNION ALL
  SELECT (SELECT m.target FROM msg_event m
          WHERE m.status IN ('PENDING', 'DELIVERING') AND m.target > t.target
          ORDER BY m.target LIMIT 1)
  FROM t WHERE t.target IS NOT NULL
)
SELECT t.target, h.event_id, h.status, h.lock_until, h.next_attempt_at, h.created_at, ot.last_flush_at
FROM t
CROSS JOIN LATERAL (
  SELECT event_id, status, lock_until, next_attempt_at, created_at FROM msg_event m
  WHERE m.target = t.target AND m.status IN ('PENDING', 'DELIVERING')
  ORDER BY m.event_id LIMIT 1
) h
LEFT JOIN outbox_target ot ON ot.target = t.target
WHERE t.target IS NOT NULL`;

interface ClaimedRow {
  event_id: number;
  partition_key: string | null;
  event_type: string;
  value: string | null;
  headers: Record<string, unknown> | null;
  attempts: number;
  source_kind: string | null;
  source_id: string | null;
  delivered_to: string[] | null;
  /** schd only: the aggregation group and the event that represents it. */
  grp?: string;
  newest_id?: number;
}

// The head run of an ordinary target: msgx_outbox_claim (migration 004) takes the target's
// advisory lock, then leases the open events in event_id order, cut before the first one that is
// leased by someone else or not due. A head that failed before is retried alone, so a poison
// event is isolated and innocent followers are not charged for it. One round trip.
const CLAIM_SQL = `SELECT * FROM msgx_outbox_claim($1, $2, $3, $4, $5, $6)`;

// schd: group the open events per FLID, take the newest state_version of each group whose newest
// is due and which nobody else holds, oldest groups first, at most the flush limit; lease every
// event of those groups. The period is checked and advanced in the same statement.
const CLAIM_SCHD_SQL = `
WITH flush_due AS (
  SELECT NOT EXISTS (SELECT 1 FROM outbox_target WHERE target = $1 AND last_flush_at > $6) AS ok
), open AS (
  SELECT event_id, coalesce(flid, partition_key, 'event:' || event_id) AS grp, state_version, status, lock_until
  FROM msg_event WHERE target = $1 AND status IN ('PENDING', 'DELIVERING')
), grp AS (
  SELECT grp, min(event_id) AS first_id,
         (array_agg(event_id ORDER BY state_version DESC NULLS LAST, event_id DESC))[1] AS newest_id,
         bool_or(status = 'DELIVERING' AND lock_until > $3) AS leased
  FROM open GROUP BY grp
), pick AS (
  SELECT g.grp, g.newest_id FROM grp g JOIN msg_event n ON n.event_id = g.newest_id
  WHERE NOT g.leased AND n.next_attempt_at <= $3 AND (SELECT ok FROM flush_due)
  ORDER BY g.first_id LIMIT $2
), claimed AS (
  UPDATE msg_event e SET status = 'DELIVERING', lock_until = $4, locked_by = $5
  FROM open o JOIN pick p ON p.grp = o.grp
  WHERE e.event_id = o.event_id AND (e.status = 'PENDING' OR e.lock_until <= $3)
  RETURNING e.event_id, e.partition_key, e.event_type, e.value, e.headers, e.attempts, e.source_kind, e.source_id,
    o.grp, p.newest_id
), flushed AS (
  INSERT INTO outbox_target (target, last_flush_at)
  SELECT $1, $3 WHERE EXISTS (SELECT 1 FROM claimed)
  ON CONFLICT (target) DO UPDATE SET last_flush_at = EXCLUDED.last_flush_at
)
SELECT c.*, (SELECT array_agg(d.publisher) FROM event_delivery d WHERE d.event_id = c.event_id AND d.outcome = 'ok') AS delivered_to
FROM claimed c`;

// One call records a whole batch: every row's new state and every publisher outcome (migration 004).
const MARK_SQL = `SELECT * FROM msgx_outbox_mark($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`;

interface RowUpdate {
  id: number;
  status: 'SENT' | 'PENDING' | 'DEAD';
  attempts: number;
  nextAt: Date | null;
  error: string | null;
  sentAs: number | null;
}

interface Outcome {
  id: number;
  publisher: string;
  ok: boolean;
  partition: number | null;
  offset: number | null;
  error: string | null;
}

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

  let heads = (await ctx.db.query<HeadRow>(DISCOVER_SQL)).rows;
  if (options.targets) heads = heads.filter((h) => options.targets!.includes(h.target));
  const discoverMs = performance.now() - started;

  const reports = await Promise.all(
    heads.map((head) => {
      const pubs = typeof publishers === 'function' ? publishers(head.target) : publishers;
      return deliverTarget(ctx, pubs, head, now, me, options).catch((err: unknown) => {
        const r = emptyReport(head, now);
        r.skipped = 'error';
        r.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        ctx.log.error({ message: 'outbox_target_failed', target: head.target, error: r.error });
        return r;
      });
    }),
  );

  const report: DispatchReport = {
    targets: reports,
    sent: sum(reports, 'sent'),
    retried: sum(reports, 'retried'),
    dead: sum(reports, 'dead'),
    more: reports.some((r) => r.target !== 'schd' && !!r.full),
    discoverMs: round(discoverMs),
    totalMs: round(performance.now() - started),
  };
  logRound(ctx.log, report);
  metrics.recordRound(report);
  return report;
}

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
        cur.length >= settings.batchSize &&
        batches < maxBatches &&
        ctx.clock.now().getTime() - nowMs < ctx.config.outbox.leaseMs / 2;
      const last = cur[cur.length - 1]!.event_id;
      const [sent, next] = await Promise.all([
        publishRun(ctx, pubs, head.target, settings, cur, report),
        wantMore ? claimRun(ctx, head.target, settings, ctx.clock.now(), me, last, report) : Promise.resolve(null),
      ]);
      if (marking) await marking;
      const { updates, outcomes } = decide(pubs, settings, at, cur, sent.rows, sent.results, isSchd);
      const failed = updates.some((u) => u.status !== 'SENT');
      if (failed && next?.length)
        for (const r of next)
          updates.push({ id: r.event_id, status: 'PENDING', attempts: r.attempts, nextAt: null, error: null, sentAs: null });
      report.full = !failed && cur.length >= settings.batchSize;
      marking = markRun(ctx, head.target, updates, outcomes, at, me, options, report);
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

/** Leases the head run of a target (after = 0) or the run after the caller's own batch; null = locked. */
async function claimRun(
  ctx: DispatchContext,
  target: string,
  settings: DeliverySettings,
  now: Date,
  me: string,
  after: number,
  report: TargetReport,
): Promise<ClaimedRow[] | null> {
  const isSchd = target === 'schd';
  const nowMs = now.getTime();
  // Claim.
  const t0 = performance.now();
  const lockUntil = new Date(nowMs + ctx.config.outbox.leaseMs);
  let claimed: ClaimedRow[] | null;
  if (isSchd) {
    claimed = await ctx.db.tx(async (tx) => {
      const lock = await tx.query<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok`, [
        `msgx:target:${target}`,
      ]);
      if (!lock.rows[0]?.ok) return null;
      const periodStart = new Date(nowMs - ctx.config.outbox.schdFlushPeriodMs);
      return (
        await tx.query<ClaimedRow>(CLAIM_SCHD_SQL, [
          target,
          ctx.config.outbox.schdFlushLimit,
          now,
          lockUntil,
          me,
          periodStart,
        ])
      ).rows;
    });
  } else {
    const rows = (await ctx.db.query<ClaimedRow & { locked: boolean }>(CLAIM_SQL, [target, settings.batchSize, now, lockUntil, me, after])).rows;
    claimed = rows.length === 1 && rows[0]!.locked ? null : rows;
  }
  report.claimMs = round(report.claimMs + performance.now() - t0);
  if (claimed === null) return null;
  claimed.sort((a, b) => a.event_id - b.event_id);
  report.claimed += claimed.length;
  return claimed;
}

/** Publishes a claimed run to every publisher (schd: only the newest version of each FLID). */
async function publishRun(
  ctx: DispatchContext,
  pubs: Publisher[],
  target: string,
  settings: DeliverySettings,
  claimed: ClaimedRow[],
  report: TargetReport,
): Promise<{ rows: ClaimedRow[]; results: PublishResult[][] }> {
  // Outside any transaction, every publisher at once, each under the deadline.
  const topic = topicForTarget(ctx.config, target);
  const sendRows = target === 'schd' ? claimed.filter((r) => r.event_id === r.newest_id) : claimed;
  const records = sendRows.map((r) => toRecord(r, target, topic ?? ''));
  report.published += records.length;
  const results = await publishAll(ctx, pubs, sendRows, records, settings, topic, report);
  return { rows: sendRows, results };
}

/** The next state of every claimed row, and the per-publisher outcomes to record. */
function decide(
  pubs: Publisher[],
  settings: DeliverySettings,
  now: Date,
  claimed: ClaimedRow[],
  sendRows: ClaimedRow[],
  results: PublishResult[][],
  isSchd: boolean,
): { updates: RowUpdate[]; outcomes: Outcome[] } {
  const nowMs = now.getTime();
  // Decide every row's next state.
  const updates: RowUpdate[] = [];
  const outcomes: Outcome[] = [];
  const failedNow = (row: ClaimedRow, error: string): RowUpdate => {
    const attempts = row.attempts + 1;
    const dead = attempts >= settings.maxRetryCount;
    return {
      id: row.event_id,
      status: dead ? 'DEAD' : 'PENDING',
      attempts,
      nextAt: dead ? null : new Date(nowMs + backoffMs(settings, attempts)),
      error,
      sentAs: null,
    };
  };

  if (!isSchd) {
    let blocked = false;
    for (let i = 0; i < sendRows.length; i++) {
      const row = sendRows[i]!;
      const per = results.map((rs) => rs[i]!);
      collectOutcomes(outcomes, row, pubs, per, blocked);
      if (blocked) {
        updates.push({ id: row.event_id, status: 'PENDING', attempts: row.attempts, nextAt: null, error: null, sentAs: null });
        continue;
      }
      const failures = failuresOf(pubs, per);
      if (failures.length === 0) {
        updates.push({ id: row.event_id, status: 'SENT', attempts: row.attempts, nextAt: null, error: null, sentAs: null });
      } else {
        // The first event not taken by every publisher: it alone is charged; the rest of the
        // run goes back to PENDING behind it (no overtaking).
        updates.push(failedNow(row, failures.join('; ')));
        blocked = true;
      }
    }
  } else {
    const members = new Map<number, ClaimedRow[]>();
    for (const r of claimed) {
      const list = members.get(r.newest_id!) ?? [];
      list.push(r);
      members.set(r.newest_id!, list);
    }
    for (let i = 0; i < sendRows.length; i++) {
      const row = sendRows[i]!;
      const per = results.map((rs) => rs[i]!);
      collectOutcomes(outcomes, row, pubs, per, false);
      const failures = failuresOf(pubs, per);
      const others = (members.get(row.event_id) ?? []).filter((m) => m.event_id !== row.event_id);
      if (failures.length === 0) {
        updates.push({ id: row.event_id, status: 'SENT', attempts: row.attempts, nextAt: null, error: null, sentAs: null });
        for (const m of others)
          updates.push({ id: m.event_id, status: 'SENT', attempts: m.attempts, nextAt: null, error: null, sentAs: row.event_id });
        continue;
      }
      const onlyNotAttempted = per.every((p) => p.ok || p.notAttempted);
      const u = onlyNotAttempted
        ? { id: row.event_id, status: 'PENDING' as const, attempts: row.attempts, nextAt: null, error: null, sentAs: null }
        : failedNow(row, failures.join('; '));
      updates.push(u);
      for (const m of others) {
        // The versions it stands for share its fate: merged again next flush, or dead with it.
        updates.push(
          u.status === 'DEAD'
            ? { id: m.event_id, status: 'DEAD', attempts: m.attempts, nextAt: null, error: `superseded by dead event ${row.event_id}`, sentAs: row.event_id }
            : { id: m.event_id, status: 'PENDING', attempts: m.attempts, nextAt: null, error: null, sentAs: null },
        );
      }
    }
  }

  return { updates, outcomes };
}

async function markRun(
  ctx: DispatchContext,
  target: string,
  updates: RowUpdate[],
  outcomes: Outcome[],
  now: Date,
  me: string,
  options: DispatchOptions,
  report: TargetReport,
): Promise<void> {
  // Mark.
  const t2 = performance.now();
  const marked = await mark(ctx, updates, outcomes, now, me, options);
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

async function publishAll(
  ctx: DispatchContext,
  pubs: Publisher[],
  rows: ClaimedRow[],
  records: OutRecord[],
  settings: DeliverySettings,
  topic: string | null,
  report: TargetReport,
): Promise<PublishResult[][]> {
  if (topic === null) {
    const error = `unknown target ${records[0]?.target}: expected msg, schd or tx:<topic>`;
    return pubs.map(() => records.map(() => ({ ok: false as const, error })));
  }
  return Promise.all(
    pubs.map(async (p) => {
      // Publishers that already took an event (an earlier attempt of a fan-out) are skipped.
      const idx: number[] = [];
      for (let i = 0; i < rows.length; i++) if (!rows[i]!.delivered_to?.includes(p.name)) idx.push(i);
      const out: PublishResult[] = records.map(() => ({ ok: true as const, already: true }) as PublishResult);
      if (idx.length === 0) return out;
      const t = performance.now();
      const got = await withDeadline(ctx.clock, settings.publishTimeoutMs, (signal) =>
        p.publish(
          idx.map((i) => records[i]!),
          signal,
        ),
      ).catch((err: unknown): PublishResult[] => {
        const error = err instanceof Error ? err.message : String(err);
        return idx.map(() => ({ ok: false as const, error }));
      });
      report.publishMs[p.name] = round((report.publishMs[p.name] ?? 0) + performance.now() - t);
      for (let k = 0; k < idx.length; k++) {
        out[idx[k]!] = got[k] ?? { ok: false, error: `${p.name} returned ${got.length} results for ${idx.length} records` };
      }
      return out;
    }),
  );
}

/** Runs `fn` with a signal that aborts after `ms` of the clock; stops waiting at the deadline. */
async function withDeadline<T>(clock: Clock, ms: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController();
  const stopTimer = new AbortController();
  const timer = clock.sleep(ms, stopTimer.signal).then(() => {
    if (!stopTimer.signal.aborted) ac.abort(new Error(`publish timeout after ${ms}ms`));
  });
  try {
    return await new Promise<T>((resolve, reject) => {
      ac.signal.addEventListener('abort', () => reject(ac.signal.reason), { once: true });
      fn(ac.signal).then(resolve, reject);
    });
  } finally {
    stopTimer.abort();
    void timer;
  }
}

function collectOutcomes(out: Outcome[], row: ClaimedRow, pubs: Publisher[], per: PublishResult[], blocked: boolean) {
  for (let j = 0; j < pubs.length; j++) {
    const r = per[j]!;
    if ((r as { already?: boolean }).already) continue;
    if (r.ok) {
      out.push({ id: row.event_id, publisher: pubs[j]!.name, ok: true, partition: r.partition ?? null, offset: r.offset ?? null, error: null });
    } else if (!blocked && !r.notAttempted) {
      out.push({ id: row.event_id, publisher: pubs[j]!.name, ok: false, partition: null, offset: null, error: r.error });
    }
  }
}

function failuresOf(pubs: Publisher[], per: PublishResult[]): string[] {
  const f: string[] = [];
  for (let j = 0; j < pubs.length; j++) {
    const r = per[j]!;
    if (!r.ok) f.push(`${pubs[j]!.name}: ${r.error}`);
  }
  return f;
}

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
    return rows;
  };
  // One statement is atomic on its own; a transaction only when hooks join it.
  return options.onSent || options.onDead ? ctx.db.tx(run) : run(ctx.db);
}

function toRecord(r: ClaimedRow, target: string, topic: string): OutRecord {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers ?? {})) headers[k] = typeof v === 'string' ? v : JSON.stringify(v);
  headers[HEADER_EVENT_ID] = String(r.event_id);
  headers[HEADER_EVENT_TYPE] = r.event_type;
  return { eventId: r.event_id, target, topic, key: r.partition_key, value: r.value, type: r.event_type, headers };
}

function settingsOf(ctx: DispatchContext, target: string): DeliverySettings {
  return deliverySettingsFor(ctx.config.outbox, target);
}

function emptyReport(head: HeadRow, now: Date): TargetReport {
  return {
    target: head.target,
    claimed: 0,
    published: 0,
    sent: 0,
    retried: 0,
    dead: 0,
    released: 0,
    lostLease: 0,
    oldestPendingSeconds: Math.max(0, Math.round((now.getTime() - new Date(head.created_at).getTime()) / 1000)),
    claimMs: 0,
    publishMs: {},
    markMs: 0,
  };
}

/** One line per round (seed 001 room_command_timing): the time of every stage, per target. */
function logRound(log: Log, r: DispatchReport): void {
  const active = r.targets.filter((t) => t.claimed > 0 || t.skipped === 'error');
  const line = {
    message: 'outbox_dispatch_timing',
    total_ms: r.totalMs,
    discover_ms: r.discoverMs,
    sent: r.sent,
    retried: r.retried,
    dead: r.dead,
    targets: active.map((t) => ({
      target: t.target,
      claimed: t.claimed,
      published: t.published,
      sent: t.sent,
      retried: t.retried,
      dead: t.dead,
      released: t.released,
      claim_ms: t.claimMs,
      publish_ms: t.publishMs,
      mark_ms: t.markMs,
      oldest_pending_s: t.oldestPendingSeconds,
    })),
  };
  // Idle and held-back rounds log at debug only: a poison event's backoff must not fill the log.
  if (active.length > 0) log.info(line);
  else log.debug(line);
}

const sum = (rs: TargetReport[], k: 'sent' | 'retried' | 'dead') => rs.reduce((n, r) => n + r[k], 0);
const round = (ms: number) => Math.round(ms * 10) / 10;

export interface DispatcherLoopOptions extends DispatchOptions {
  signal?: AbortSignal;
  /** Stop starting rounds after this long (a Lambda's budget, below its timeout). */
  budgetMs?: number;
  /** Idle wait between rounds; default config.outbox.pollIntervalMs. NOTIFY wakes it early. */
  pollIntervalMs?: number;
}

/**
 * Rounds until the signal aborts or the budget is spent: at once while a target has a full batch,
 * else after the poll interval or when an enqueue NOTIFYs. Errors of a round are logged and the
 * loop goes on after the interval.
 */
export async function runDispatcher(
  ctx: DispatchContext,
  publishers: Publisher[] | ((target: string) => Publisher[]),
  options: DispatcherLoopOptions = {},
): Promise<{ rounds: number; sent: number; dead: number }> {
  const pollMs = options.pollIntervalMs ?? ctx.config.outbox.pollIntervalMs;
  const deadline = options.budgetMs === undefined ? Infinity : ctx.clock.now().getTime() + options.budgetMs;
  let wake = new AbortController();
  const unlisten = await ctx.db.listen(OUTBOX_CHANNEL, () => wake.abort()).catch(() => null);
  const totals = { rounds: 0, sent: 0, dead: 0 };
  try {
    while (!options.signal?.aborted && ctx.clock.now().getTime() < deadline) {
      let more = false;
      try {
        const r = await dispatchOnce(ctx, publishers, { maxBatches: 10, ...options });
        totals.rounds++;
        totals.sent += r.sent;
        totals.dead += r.dead;
        more = r.more;
      } catch (err) {
        ctx.log.error({ message: 'outbox_round_failed', error: err instanceof Error ? err.message : String(err) });
      }
      if (more) continue;
      const waitMs = Math.min(pollMs, deadline - ctx.clock.now().getTime());
      if (waitMs <= 0) break;
      if (!wake.signal.aborted) {
        const both = options.signal ? AbortSignal.any([wake.signal, options.signal]) : wake.signal;
        await ctx.clock.sleep(waitMs, both);
      }
      wake = new AbortController();
    }
  } finally {
    await unlisten?.().catch(() => {});
    options.metrics?.flush();
  }
  return totals;
}
