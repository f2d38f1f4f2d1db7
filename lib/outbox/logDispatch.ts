import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import type { ClaimedRow } from './claim.ts';
import { classifyKafkaError } from './classify.ts';
import { publishRun, topicForTarget } from './publish.ts';
import type { TxRecord } from './publishers/kafkaTransactional.ts';
import { emptyReport, round, type TargetReport } from './report.ts';
import { backoffMs, deliverySettingsFor, type DeliverySettings } from './settings.ts';
import {
  HEADER_EVENT_ID,
  HEADER_EVENT_TYPE,
  type DispatchContext,
  type DispatchOptions,
  type Publisher,
  type PublishResult,
  type SentEvent,
} from './types.ts';

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
 */

/** The null key as a set member: events without a key are ordered among themselves. */
const keyOf = (k: string | null): string => (k === null ? '\u0000' : k);

interface TargetRow {
  target: string;
  has_cursor: boolean;
  open_batch: boolean;
  has_new: boolean;
  lease_owner: string | null;
  lease_until: Date | null;
  hold_until: Date | null;
  last_flush_at: Date | null;
  exception_due: Date | null;
  has_exceptions: boolean;
  created_at: Date;
}

// Targets: a loose index scan (one probe per target) over the rows no per-event mark settled; per
// target, whether its cursor has anything new, its lease, hold and exceptions. Reads only.
const DISCOVER_SQL = prepared(`
WITH RECURSIVE tg AS (
  (SELECT target FROM msg_event WHERE sent_at IS NULL AND dead_at IS NULL ORDER BY target LIMIT 1)
  UNION ALL
  SELECT (SELECT m.target FROM msg_event m WHERE m.sent_at IS NULL AND m.dead_at IS NULL AND m.target > tg.target
          ORDER BY m.target LIMIT 1)
  FROM tg WHERE tg.target IS NOT NULL
)
SELECT tg.target, t.snap_lo IS NOT NULL AS has_cursor, t.snap_hi IS NOT NULL AS open_batch,
       t.lease_owner, t.lease_until, t.hold_until, t.last_flush_at,
       n.created_at IS NOT NULL AS has_new, coalesce(n.created_at, now()) AS created_at,
       x.due AS exception_due, x.n > 0 AS has_exceptions
FROM tg
LEFT JOIN outbox_target t ON t.target = tg.target
LEFT JOIN LATERAL (
  SELECT m.created_at FROM msg_event m
  WHERE m.target = tg.target AND m.status = 'PENDING' AND m.sent_at IS NULL AND m.dead_at IS NULL
    AND m.writer_xid >= pg_snapshot_xmin(coalesce(t.snap_lo, msgx_outbox_origin()))
    AND NOT pg_visible_in_snapshot(m.writer_xid, coalesce(t.snap_lo, msgx_outbox_origin()))
  LIMIT 1) n ON true
LEFT JOIN LATERAL (
  SELECT min(next_attempt_at) AS due, count(*) AS n FROM outbox_exception e WHERE e.target = tg.target AND NOT e.dead AND NOT e.at_head) x ON true
WHERE tg.target IS NOT NULL`);

const ENSURE_CURSOR_SQL = prepared(`INSERT INTO outbox_target (target, snap_lo) VALUES ($1, msgx_outbox_origin())
  ON CONFLICT (target) DO UPDATE SET snap_lo = coalesce(outbox_target.snap_lo, msgx_outbox_origin())`);

// Lease, open (snap_hi = now unless a batch is open) and read in one statement. Opening a batch
// starts after_id just below its first possible event (the writer index finds it among the recent
// transactions), so each page reads the target's events in event_id order from there and stops at
// the page's end instead of sorting the whole window again. Neither this nor the finish waits for
// its WAL flush: a lost one only means the batch is read, and delivered, again.
const READ_SQL = prepared(`
WITH cur AS (
  UPDATE outbox_target t SET snap_hi = coalesce(t.snap_hi, pg_current_snapshot()), lease_owner = $3, lease_until = $4,
    after_id = CASE WHEN t.snap_hi IS NOT NULL THEN t.after_id ELSE coalesce(
      (SELECT min(m.event_id) - 1 FROM msg_event m
       WHERE m.writer_xid >= pg_snapshot_xmin(t.snap_lo) AND m.target = $1 AND m.sent_at IS NULL AND m.dead_at IS NULL),
      t.after_id) END
  WHERE t.target = $1 AND t.snap_lo IS NOT NULL AND (t.lease_owner IS NULL OR t.lease_owner = $3 OR t.lease_until <= $5)
  RETURNING t.snap_lo, t.snap_hi, t.after_id)
SELECT c.snap_lo::text AS lo, c.snap_hi::text AS hi, c.after_id, c.snap_hi::text <> pg_current_snapshot()::text AS stale,
       set_config('synchronous_commit', 'off', true) AS async_commit,
       e.event_id, e.partition_key, e.event_type, e.value, e.headers, e.source_kind, e.source_id,
       e.flid, e.state_version, coalesce(h.attempts, 0) AS attempts, array_to_string(h.delivered_to, ',') AS delivered_to,
       h.event_id IS NOT NULL AS at_head
FROM cur c LEFT JOIN LATERAL (
  SELECT m.event_id, m.partition_key, m.event_type, m.value, m.headers, m.source_kind, m.source_id, m.flid, m.state_version
  FROM msg_event m
  WHERE m.target = $1 AND m.event_id > c.after_id AND m.sent_at IS NULL AND m.dead_at IS NULL AND m.status = 'PENDING'
    AND pg_visible_in_snapshot(m.writer_xid, c.snap_hi) AND NOT pg_visible_in_snapshot(m.writer_xid, c.snap_lo)
    AND NOT EXISTS (SELECT 1 FROM outbox_exception x WHERE x.target = $1 AND x.event_id = m.event_id AND NOT x.at_head)
  ORDER BY m.event_id LIMIT $2) e ON true
LEFT JOIN outbox_exception h ON h.target = $1 AND h.event_id = e.event_id AND h.at_head
ORDER BY e.event_id`);

// Moves the cursor, releases the lease, records the target's hold and the batch's exceptions; only
// while the batch is still ours (our lease, the same snap_hi).
const FINISH_SQL = prepared(`
WITH f AS (
  UPDATE outbox_target SET
    snap_lo = CASE WHEN $3::boolean THEN snap_hi ELSE snap_lo END,
    snap_hi = CASE WHEN $3 THEN NULL ELSE snap_hi END,
    after_id = CASE WHEN $3 THEN 0 ELSE greatest(after_id, $4::bigint) END,
    lease_owner = NULL, lease_until = NULL, updated_at = $6::timestamptz,
    hold_until = $7::timestamptz, stalled_since = CASE WHEN $17::boolean THEN coalesce(stalled_since, $6) END,
    last_error = $8::text,
    last_flush_at = coalesce($9::timestamptz, last_flush_at)
  WHERE target = $1 AND snap_hi::text = $2 AND lease_owner = $5
  RETURNING target),
x AS (
  INSERT INTO outbox_exception AS o (target, event_id, attempts, next_attempt_at, last_error, dead, partition_key, delivered_to,
                                     at_head, updated_at)
  SELECT f.target, v.id, v.attempts, v.next_at, v.err, v.dead, v.key, string_to_array(v.dto, ','), v.at_head, $6
  FROM f, unnest($10::bigint[], $11::int[], $12::timestamptz[], $13::text[], $14::boolean[], $15::text[], $16::text[], $18::boolean[])
       AS v(id, attempts, next_at, err, dead, key, dto, at_head)
  ON CONFLICT (target, event_id) DO UPDATE SET attempts = EXCLUDED.attempts, next_attempt_at = EXCLUDED.next_attempt_at,
    last_error = EXCLUDED.last_error, dead = EXCLUDED.dead, delivered_to = EXCLUDED.delivered_to, at_head = EXCLUDED.at_head,
    updated_at = EXCLUDED.updated_at),
d AS (
  -- A failed head that went through this time.
  DELETE FROM outbox_exception WHERE target = $1 AND at_head AND event_id = ANY($19::bigint[]) AND EXISTS (SELECT 1 FROM f))
SELECT count(*)::int AS n, set_config('synchronous_commit', 'off', true) AS async_commit FROM f`);

const LEASE_SQL = prepared(
  `UPDATE outbox_target SET lease_owner = $2, lease_until = $3 WHERE target = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until <= $4)`,
);
const RELEASE_SQL = prepared(`UPDATE outbox_target SET lease_owner = NULL, lease_until = NULL WHERE target = $1 AND lease_owner = $2`);

// The due head of each key among a target's exceptions (nothing overtakes an earlier event of its key).
const HEADS_SQL = prepared(`
SELECT x.event_id, x.attempts, array_to_string(x.delivered_to, ',') AS delivered_to, m.partition_key, m.event_type, m.value,
       m.headers, m.source_kind, m.source_id, m.flid, m.state_version
FROM outbox_exception x JOIN msg_event m ON m.event_id = x.event_id
WHERE x.target = $1 AND NOT x.dead AND NOT x.at_head AND x.next_attempt_at <= $2
  AND NOT EXISTS (SELECT 1 FROM outbox_exception y WHERE y.target = $1 AND NOT y.dead AND NOT y.at_head AND y.event_id < x.event_id
                  AND y.partition_key IS NOT DISTINCT FROM x.partition_key)
ORDER BY x.event_id LIMIT $3`);

const SETTLE_SQL = prepared(`
WITH d AS (DELETE FROM outbox_exception WHERE target = $1 AND event_id = ANY($2::bigint[])),
u AS (
  UPDATE outbox_exception x SET attempts = v.attempts, next_attempt_at = v.next_at, last_error = v.err, dead = v.dead,
    delivered_to = string_to_array(v.dto, ','), updated_at = $8::timestamptz
  FROM unnest($3::bigint[], $4::int[], $5::timestamptz[], $6::text[], $7::boolean[], $9::text[]) AS v(id, attempts, next_at, err, dead, dto)
  WHERE x.target = $1 AND x.event_id = v.id)
UPDATE outbox_target SET hold_until = $10::timestamptz, stalled_since = CASE WHEN $10 IS NULL THEN NULL ELSE coalesce(stalled_since, $8) END,
  last_error = $11::text
WHERE target = $1`);

const KEYS_SQL = prepared(`SELECT DISTINCT partition_key FROM outbox_exception WHERE target = $1 AND NOT dead AND NOT at_head`);

interface LogRow {
  event_id: string | number;
  partition_key: string | null;
  event_type: string;
  value: string | null;
  headers: Record<string, unknown> | null;
  source_kind: string | null;
  source_id: string | null;
  flid: string | null;
  state_version: number | null;
  attempts?: number;
  delivered_to?: string | null;
  at_head?: boolean;
}

function toClaimed(r: LogRow, isSchd: boolean): ClaimedRow {
  const dto = r.delivered_to ? r.delivered_to.split(',').filter(Boolean) : null;
  return {
    event_id: Number(r.event_id),
    partition_key: r.partition_key,
    event_type: r.event_type,
    value: r.value,
    headers: r.headers,
    attempts: r.attempts ?? 0,
    source_kind: r.source_kind,
    source_id: r.source_id,
    delivered_to: dto,
    ...(isSchd ? { grp: r.flid ?? r.partition_key ?? `event:${r.event_id}` } : {}),
    ...(r.at_head ? { at_head: true } : {}),
  };
}

/** An event as the transactional producer writes it (the headers as every publisher sends them). */
function txRecord(r: ClaimedRow): TxRecord {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers ?? {})) headers[k] = typeof v === 'string' ? v : JSON.stringify(v);
  headers[HEADER_EVENT_ID] = String(r.event_id);
  headers[HEADER_EVENT_TYPE] = r.event_type;
  return { key: r.partition_key, value: r.value, headers };
}

/** A new exception row (or an exception's next state). */
interface Exc {
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
type Verdict = { kind: 'ok' } | { kind: 'outage' | 'untried'; error: string } | { kind: 'charged'; error: string; took: string[] };

function verdictOf(pubs: Publisher[], per: PublishResult[]): Verdict {
  const failed = pubs.map((p, j) => ({ p, r: per[j]! })).filter((x) => !x.r.ok);
  if (failed.length === 0) return { kind: 'ok' };
  const error = failed.map((x) => `${x.p.name}: ${(x.r as { error: string }).error}`).join('; ');
  const bad = failed.filter((x) => !(x.r as { notAttempted?: boolean }).notAttempted);
  if (bad.length === 0) return { kind: 'untried', error };
  if (bad.every((x) => (x.r as { unavailable?: boolean }).unavailable)) return { kind: 'outage', error };
  return { kind: 'charged', error, took: pubs.filter((_, j) => per[j]!.ok).map((p) => p.name) };
}

function charge(settings: DeliverySettings, now: Date, row: ClaimedRow, error: string, took: string[]): Exc {
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
      return deliverLogTarget(ctx, pubs, t, now, me, options).catch((err: unknown) => {
        const r = emptyReport(t, now);
        r.skipped = 'error';
        r.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        ctx.log.error({ message: 'outbox_target_failed', target: t.target, error: r.error });
        return r;
      });
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
    report.skipped = 'leased';
    return report;
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
    const limit = isSchd ? ctx.config.outbox.schdFlushLimit : settings.batchSize;
    const maxBatches = isSchd ? 1 : Math.max(1, options.maxBatches ?? 1);
    for (let b = 0; b < maxBatches; b++) {
      const r = await relayBatch(ctx, pubs, target, settings, limit, me, leaseUntil(), held, options, report);
      holding = r !== 'lost';
      if (r !== 'more') break;
      holding = false;
      if (ctx.clock.now().getTime() - nowMs >= ctx.config.outbox.leaseMs / 2) {
        report.full = true;
        break;
      }
    }
    holding = false;
    return report;
  } finally {
    if (holding) await ctx.db.query(RELEASE_SQL, [target, me]).catch(() => {});
  }
}

/** One batch: read under the lease, publish, one finish statement. */
async function relayBatch(
  ctx: DispatchContext,
  pubsIn: Publisher[],
  target: string,
  settings: DeliverySettings,
  limit: number,
  me: string,
  leaseUntil: Date,
  held: Set<string>,
  options: DispatchOptions,
  report: TargetReport,
): Promise<'more' | 'done' | 'lost'> {
  let pubs = pubsIn;
  const isSchd = target === 'schd';
  const topic = topicForTarget(ctx.config, target);
  const eos = options.exactlyOnce && topic !== null ? options.exactlyOnce : null;
  if (eos && !eos.isOpen(target)) {
    // Fence an older producer and adopt Kafka's cursor while no one else may move this target's.
    const leased = await ctx.db.query(LEASE_SQL, [target, me, leaseUntil, ctx.clock.now()]);
    if (leased.rowCount !== 1) {
      report.skipped = 'leased';
      return 'lost';
    }
  }
  const sink = eos ? await eos.prepare(ctx.db, target, topic!) : null;
  if (eos) pubs = pubs.filter((p) => p.name !== eos.replaces);
  const t0 = performance.now();
  const read = await ctx.db.query<LogRow & { lo: string; hi: string; after_id: string | number; stale: boolean }>(READ_SQL, [
    target,
    limit,
    me,
    leaseUntil,
    ctx.clock.now(),
  ]);
  report.claimMs = round(report.claimMs + performance.now() - t0);
  if (read.rows.length === 0) {
    report.skipped = 'leased';
    return 'lost';
  }
  const snapHi = read.rows[0]!.hi;
  let rows = read.rows.filter((r) => r.event_id !== null).map((r) => toClaimed(r, isSchd));
  let drained = rows.length < limit;
  // A head that failed before goes alone: a batch the destination refuses whole (one record too
  // large) must charge the event that is at fault, not the innocent one that happens to lead it.
  if (rows.length > 1 && rows[0]!.attempts > 0 && !isSchd) {
    rows = rows.slice(0, 1);
    drained = false;
  }
  report.claimed += rows.length;

  // schd sends the newest version of each flight in the batch; the older ones go with it.
  if (isSchd) {
    const newest = new Map<string, { id: number; v: number }>();
    for (const r of read.rows) {
      if (r.event_id === null) continue;
      const g = r.flid ?? r.partition_key ?? `event:${r.event_id}`;
      const v = r.state_version ?? -1;
      const cur = newest.get(g);
      if (!cur || v > cur.v || (v === cur.v && Number(r.event_id) > cur.id)) newest.set(g, { id: Number(r.event_id), v });
    }
    for (const r of rows) r.newest_id = newest.get(r.grp!)!.id;
  }

  const now = ctx.clock.now();
  const exceptions: Exc[] = [];
  const sent: ClaimedRow[] = [];
  const dead: ClaimedRow[] = [];
  const retried: (ClaimedRow & { error: string })[] = [];
  let stopAfter: number | null = null; // the cursor stops after this event (a failure, an outage, an untried event)
  let hold: { error: string; until: Date; stalled: boolean } | null = null;
  const headsSent: number[] = [];

  const go = rows.filter((r) => !held.has(keyOf(r.partition_key)));
  const byId = new Map<number, PublishResult[]>();
  if (go.length > 0) {
    const out = await publishRun(ctx, pubs, target, settings, go, report);
    out.rows.forEach((r, i) =>
      byId.set(
        r.event_id,
        out.results.map((rs) => rs[i]!),
      ),
    );
  }
  const verdictCache = new Map<number, Verdict>();
  const verdictFor = (r: ClaimedRow): Verdict => {
    const id = isSchd ? r.newest_id! : r.event_id;
    let v = verdictCache.get(id);
    if (!v) {
      v = verdictOf(pubs, byId.get(id)!);
      verdictCache.set(id, v);
    }
    return v;
  };
  let prev = 0;
  for (const r of rows) {
    const k = keyOf(r.partition_key);
    if (held.has(k)) {
      exceptions.push({ id: r.event_id, attempts: 0, nextAt: now, error: null, dead: false, key: r.partition_key, deliveredTo: [] });
      prev = r.event_id;
      continue;
    }
    const v = verdictFor(r);
    if (v.kind === 'ok') {
      sent.push(r);
      if ((r as ClaimedRow & { at_head?: boolean }).at_head) headsSent.push(r.event_id);
    } else if (v.kind === 'charged') {
      if (isSchd && r.event_id !== r.newest_id) {
        // An older version of a flight whose newest failed: it is replaced by that one, not retried.
        sent.push(r);
      } else {
        const e = charge(settings, now, r, v.error, v.took);
        if (e.dead) {
          // Given up: the dead letter stays, the cursor passes it and the events behind it go on.
          exceptions.push(e);
          dead.push(r);
        } else if (isSchd) {
          // Flights do not hold each other: this one is retried on its own, ahead of its later versions.
          exceptions.push(e);
          retried.push({ ...r, error: v.error });
          held.add(k);
        } else {
          // Nothing overtakes a failed event: the cursor stops before it until its next attempt.
          exceptions.push({ ...e, atHead: true });
          retried.push({ ...r, error: v.error });
          stopAfter = prev;
          hold = { error: v.error, until: e.nextAt!, stalled: false };
          break;
        }
      }
    } else {
      stopAfter = prev;
      if (v.kind === 'outage') hold = { error: v.error, until: new Date(now.getTime() + settings.initialBackoffMs), stalled: true };
      break;
    }
    prev = r.event_id;
  }

  let isAll = stopAfter === null;
  let lastId = isAll ? (rows.at(-1)?.event_id ?? 0) : stopAfter!;
  let fullyDrained = isAll && drained;

  if (eos && sink) {
    // Exactly once: what the other publishers settled goes to Kafka with the cursor it ends at, in one
    // transaction; PostgreSQL mirrors that cursor after. A refused transaction moves nothing.
    const afterId = Number(read.rows[0]!.after_id);
    const cursor = fullyDrained
      ? { snapLo: snapHi, snapHi: null, afterId: 0 }
      : { snapLo: read.rows[0]!.lo, snapHi, afterId: Math.max(afterId, lastId) };
    const records = sent.filter((r) => !isSchd || r.event_id === r.newest_id).map(txRecord);
    const tk = performance.now();
    try {
      await eos.deliver(target, sink, records, cursor);
      report.published += records.length;
    } catch (err) {
      const c = classifyKafkaError(err);
      sent.length = 0;
      dead.length = 0;
      retried.length = 0;
      exceptions.length = 0;
      isAll = false;
      fullyDrained = false;
      lastId = 0;
      const head = rows[0];
      if (c.kind === 'event' && head && !held.has(keyOf(head.partition_key))) {
        // Refused whole: charged to the batch's first event, which is then tried alone.
        const e = charge(settings, now, head, `kafka: ${c.error}`, []);
        exceptions.push(e.dead ? e : { ...e, atHead: true });
        if (e.dead) {
          dead.push(head);
          lastId = head.event_id;
        } else {
          retried.push({ ...head, error: e.error! });
          hold = { error: e.error!, until: e.nextAt!, stalled: false };
        }
      } else {
        hold = { error: `kafka: ${c.error}`, until: new Date(now.getTime() + settings.initialBackoffMs), stalled: true };
      }
    }
    report.publishMs['kafka'] = round((report.publishMs['kafka'] ?? 0) + performance.now() - tk);
  }
  const periodStart = new Date(now.getTime() - ctx.config.outbox.schdFlushPeriodMs);
  const flushAt = isSchd ? (drained ? now : periodStart) : null;
  const params = [
    target,
    snapHi,
    fullyDrained,
    lastId,
    me,
    now,
    hold?.until ?? null,
    hold?.error ?? null,
    flushAt,
    exceptions.map((e) => e.id),
    exceptions.map((e) => e.attempts),
    exceptions.map((e) => e.nextAt),
    exceptions.map((e) => e.error),
    exceptions.map((e) => e.dead),
    exceptions.map((e) => e.key),
    exceptions.map((e) => e.deliveredTo.join(',')),
    !!hold?.stalled,
    exceptions.map((e) => !!e.atHead),
    headsSent,
  ];
  const t2 = performance.now();
  const ok = await settle(ctx, options, now, { sent, dead, retried }, async (q) => {
    const f = await q.query<{ n: number }>(FINISH_SQL, params);
    return f.rows[0]?.n === 1;
  });
  report.markMs = round(report.markMs + performance.now() - t2);
  if (!ok) {
    report.lostLease += rows.length;
    ctx.log.warn({ message: 'outbox_lease_lost', target, rows: rows.length });
    return 'lost';
  }
  report.sent += sent.length;
  report.dead += dead.length;
  report.retried += retried.length;
  logFailures(ctx, target, exceptions, hold);
  if (hold) return 'done';
  // Stopped before an event no publisher tried (behind a failure in the same publish), or finished a
  // batch opened earlier (more may have committed since): read on.
  report.full = !fullyDrained;
  return fullyDrained && !read.rows[0]!.stale ? 'done' : 'more';
}

/** Retries the due heads of a target's exceptions once; what it found. */
async function retryHeads(
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
async function settle(
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

function logFailures(ctx: DispatchContext, target: string, exceptions: Exc[], hold: { error: string; stalled?: boolean } | null): void {
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
