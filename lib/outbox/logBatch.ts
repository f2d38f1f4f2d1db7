import { prepared } from '../db/prepared.ts';
import type { ClaimedRow } from './types.ts';
import { addResults, BatchLog, batchLogCte } from './batchLog.ts';
import { classifyKafkaError, isProducerFenced } from './classify.ts';
import { charge, logFailures, settle, verdictOf, type Exc, type Verdict } from './logFailures.ts';
import { markNewest } from './logSchd.ts';
import { keyOf, LEASE_SQL, READ_AHEAD_SQL, READ_SQL, toClaimed, type PageRow } from './logLease.ts';
import { publishRun, topicForTarget } from './publish.ts';
import type { OffsetsPosition, TxRecord } from './publishers/kafkaTransactional.ts';
import { round, type TargetReport } from './report.ts';
import type { DeliverySettings } from './settings.ts';
import {
  HEADER_EVENT_ID,
  HEADER_EVENT_TYPE,
  type DispatchContext,
  type DispatchOptions,
  type Publisher,
  type PublishResult,
} from './types.ts';

// One batch of the log: read under the lease, publish, one statement that finishes it.

// Moves the cursor, releases the lease (or keeps it, renewed, for a page already read behind this
// one), records the target's hold and the batch's exceptions; only while the batch is still ours
// (our lease, the same snap_hi). Under exactly once it also records where the cursor's offsets record
// landed ($28–$31, migration 018), which lets a start skip reading the topic back; a cursor that
// moves without a Kafka commit (a dead head the refused transaction never carried) is no record's
// cursor any more, and the position is cleared. One that stays put keeps it.
export const FINISH_SQL = prepared(`
WITH f AS (
  UPDATE outbox_target SET
    snap_lo = CASE WHEN $3::boolean THEN snap_hi ELSE snap_lo END,
    snap_hi = CASE WHEN $3 THEN NULL ELSE snap_hi END,
    after_id = CASE WHEN $3 THEN 0 ELSE greatest(after_id, $4::bigint) END,
    lease_owner = CASE WHEN $20::boolean THEN lease_owner END, lease_until = CASE WHEN $20 THEN $21::timestamptz END,
    updated_at = $6::timestamptz,
    hold_until = $7::timestamptz, stalled_since = CASE WHEN $17::boolean THEN coalesce(stalled_since, $6) END,
    last_error = $8::text,
    last_flush_at = coalesce($9::timestamptz, last_flush_at),
    offsets_topic = CASE WHEN $28::text IS NOT NULL THEN $28 WHEN NOT $3 AND $4 <= after_id THEN offsets_topic END,
    offsets_partition = CASE WHEN $28 IS NOT NULL THEN $29::int WHEN NOT $3 AND $4 <= after_id THEN offsets_partition END,
    offsets_offset = CASE WHEN $28 IS NOT NULL THEN $30::bigint WHEN NOT $3 AND $4 <= after_id THEN offsets_offset END,
    offsets_partitions = CASE WHEN $28 IS NOT NULL THEN $31::int WHEN NOT $3 AND $4 <= after_id THEN offsets_partitions END
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
  DELETE FROM outbox_exception WHERE target = $1 AND at_head AND event_id = ANY($19::bigint[]) AND EXISTS (SELECT 1 FROM f)),
${batchLogCte('b', 22, { target: '$1', at: '$6', from: 'f' })}
SELECT count(*)::int AS n, set_config('synchronous_commit', 'off', true) AS async_commit FROM f`);

/** An event as the transactional producer writes it (the headers as every publisher sends them). */
export function txRecord(r: ClaimedRow): TxRecord {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers ?? {})) headers[k] = typeof v === 'string' ? v : JSON.stringify(v);
  headers[HEADER_EVENT_ID] = String(r.event_id);
  headers[HEADER_EVENT_TYPE] = r.event_type;
  return { key: r.partition_key, value: r.value, headers };
}

/** A page read while the one before it was published: its rows once the read is done. */
export type PageAhead = Promise<PageRow[]>;

/** A page's finish still under way while the next page publishes: whether it kept the target. */
export type Finishing = Promise<boolean>;

/**
 * One page: read under the lease (or taken from `ahead`, read while the page before was
 * published), publish, one finish statement. With `nextLimit`, a full page starts reading the next
 * one from its own end while it publishes; that page is returned (`next`) only when this one passed
 * whole and its finish kept the lease for it, otherwise it is dropped and read again later.
 */
export async function relayBatch(
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
  pipe: { ahead?: PageAhead; nextLimit?: number; prior?: Finishing } = {},
): Promise<{ r: 'more' | 'done' | 'lost'; next?: PageAhead; finishing?: Finishing }> {
  let pubs = pubsIn;
  const isSchd = target === 'schd';
  const topic = topicForTarget(ctx.config, target);
  const eos = options.exactlyOnce && topic !== null ? options.exactlyOnce : null;
  if (eos && !eos.isOpen(target)) {
    // Fence an older producer and adopt Kafka's cursor while no one else may move this target's.
    const leased = await ctx.db.query(LEASE_SQL, [target, me, leaseUntil, ctx.clock.now()]);
    if (leased.rowCount !== 1) {
      await pipe.prior;
      report.skipped = 'leased';
      return { r: 'lost' };
    }
  }
  const sink = eos ? await eos.prepare(ctx.db, target, topic!) : null;
  if (eos) pubs = pubs.filter((p) => p.name !== eos.replaces);
  const t0 = performance.now();
  const read = {
    rows: pipe.ahead ? await pipe.ahead : (await ctx.db.query<PageRow>(READ_SQL, [target, limit, me, leaseUntil, ctx.clock.now()])).rows,
  };
  report.claimMs = round(report.claimMs + performance.now() - t0);
  if (read.rows.length === 0) {
    await pipe.prior;
    report.skipped = 'leased';
    return { r: 'lost' };
  }
  const snapHi = read.rows[0]!.hi;
  let rows = read.rows.filter((r) => r.event_id !== null).map((r) => toClaimed(r, isSchd));
  let drained = rows.length < limit;
  const full = !drained;
  // A head that failed before goes alone: a batch the destination refuses whole (one record too
  // large) must charge the event that is at fault, not the innocent one that happens to lead it.
  if (rows.length > 1 && rows[0]!.attempts > 0 && !isSchd) {
    rows = rows.slice(0, 1);
    drained = false;
  }
  report.claimed += rows.length;

  // The next page of the same open batch, read from this page's end while this one is published.
  // It writes nothing: the cursor row still says where this page began until its finish.
  let next: PageAhead | undefined;
  if (pipe.nextLimit && !isSchd && full && rows.length > 0 && rows[0]!.attempts === 0) {
    next = ctx.db
      .query<PageRow>(READ_AHEAD_SQL, [target, pipe.nextLimit, read.rows[0]!.lo, snapHi, rows.at(-1)!.event_id])
      .then((q) => q.rows);
    next.catch(() => {}); // awaited by the next page, or dropped below
  }

  if (isSchd) markNewest(read.rows, rows);

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
  // A page of several batches goes out one batch per publish, in order, as a plain producer would
  // send it; after a batch with a failure the rest are not tried (the cursor stops there anyway).
  const step = isSchd ? Math.max(1, go.length) : settings.batchSize;
  let failedAt: string | null = null;
  for (let i = 0; i < go.length; i += step) {
    const chunk = go.slice(i, i + step);
    if (failedAt !== null) {
      const skipped: PublishResult = { ok: false, error: `not sent: an earlier event failed (${failedAt})`, notAttempted: true };
      for (const r of chunk)
        byId.set(
          r.event_id,
          pubs.map(() => skipped),
        );
      continue;
    }
    const out = await publishRun(ctx, pubs, target, settings, chunk, report);
    out.rows.forEach((r, k) =>
      byId.set(
        r.event_id,
        out.results.map((rs) => rs[k]!),
      ),
    );
    const bad = out.results.flat().find((x) => !x.ok);
    if (bad && !bad.ok) failedAt = bad.error;
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

  // What each publisher took, sent or not by the cursor's reckoning: a record that went out is logged.
  const taken = new BatchLog();
  addResults(taken, pubs, rows, byId);

  let isAll = stopAfter === null;
  let lastId = isAll ? (rows.at(-1)?.event_id ?? 0) : stopAfter!;
  let fullyDrained = isAll && drained;
  let cursorAt: OffsetsPosition | null = null; // where the committed cursor's offsets record landed

  if (eos && sink) {
    // Exactly once: what the other publishers settled goes to Kafka with the cursor it ends at, in one
    // transaction; PostgreSQL mirrors that cursor after. A refused transaction moves nothing.
    const afterId = Number(read.rows[0]!.after_id);
    const cursor = fullyDrained
      ? { snapLo: snapHi, snapHi: null, afterId: 0 }
      : { snapLo: read.rows[0]!.lo, snapHi, afterId: Math.max(afterId, lastId) };
    const txRows = sent.filter((r) => !isSchd || r.event_id === r.newest_id);
    const records = txRows.map(txRecord);
    const tk = performance.now();
    try {
      const { placed, cursorAt: at } = await eos.deliver(target, sink, records, cursor);
      cursorAt = at;
      report.published += records.length;
      placed.forEach((at, i) => taken.add(eos.replaces, txRows[i]!.event_id, { ok: true, ...at }, txRows[i]!.attempts + 1));
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
      if (isProducerFenced(err)) {
        // Another process opened this target's producer after ours (a dispatcher in another Lambda
        // environment ran meanwhile): nothing of this transaction is in Kafka. No event's fault and
        // no outage: the next page reopens the producer, fencing that one, and adopts Kafka's
        // cursor before it reads (a retry backoff here stalled every handover for seconds).
        ctx.log.info('kafka producer fenced by a newer one of its transactional.id; reopening', { target });
      } else if (c.kind === 'event' && head && !held.has(keyOf(head.partition_key))) {
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
  // The page read ahead goes on only behind a page that passed whole: it starts where this one ends.
  const keep = next !== undefined && isAll && !fullyDrained && hold === null;
  const periodStart = new Date(now.getTime() - ctx.config.outbox.schdFlushPeriodMs);
  const flushAt = isSchd ? (drained ? now : periodStart) : null;
  // The batch's time (its SENT time in the trace, the target's last move) is when the publishers
  // answered, not when the page was read: a Kafka transaction is several round trips.
  const finishedAt = ctx.clock.now();
  const params = [
    target,
    snapHi,
    fullyDrained,
    lastId,
    me,
    finishedAt,
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
    keep,
    new Date(ctx.clock.now().getTime() + ctx.config.outbox.leaseMs),
    ...taken.params(),
    cursorAt?.topic ?? null,
    cursorAt?.partition ?? null,
    cursorAt?.offset ?? null,
    cursorAt?.partitions ?? null,
  ];
  // The page before finished while this one published; one that lost the lease leaves this page
  // published but not ours to finish (nor the one read ahead behind it).
  if (pipe.prior && !(await pipe.prior)) {
    await next?.catch(() => {});
    report.lostLease += rows.length;
    return { r: 'lost' };
  }
  const finish = async (): Promise<boolean> => {
    const t2 = performance.now();
    const ok = await settle(ctx, options, now, { sent, dead, retried }, async (q) => {
      const f = await q.query<{ n: number }>(FINISH_SQL, params);
      return f.rows[0]?.n === 1;
    }).catch((err: unknown) => {
      eos?.drop(target);
      throw err;
    });
    if (!ok) eos?.drop(target);
    report.markMs = round(report.markMs + performance.now() - t2);
    if (!ok) {
      report.lostLease += rows.length;
      ctx.log.warn({ message: 'outbox_lease_lost', target, rows: rows.length });
      return false;
    }
    report.sent += sent.length;
    report.dead += dead.length;
    report.retried += retried.length;
    logFailures(ctx, target, exceptions, hold);
    return true;
  };
  if (keep) {
    // A page that passed whole finishes while the next one (read ahead) is published. Should this
    // finish fail (the lease lost), the next page was published but is not finished: under at least
    // once its events go again from the cursor (the same msgx-event-id), under exactly once Kafka's
    // cursor already has them and the next owner adopts it.
    const finishing = finish();
    finishing.catch(() => {}); // awaited by the next page or by the round
    report.full = true;
    return { r: 'more', next, finishing };
  }
  const ok = await finish();
  if (next) {
    // Its events are read again, from the cursor this finish left (or the next owner's).
    await next.catch(() => {});
    next = undefined;
  }
  if (!ok) return { r: 'lost' };
  if (hold) return { r: 'done' };
  // Stopped before an event no publisher tried (behind a failure in the same publish), or finished a
  // batch opened earlier (more may have committed since): read on.
  report.full = !fullyDrained;
  return { r: fullyDrained && !read.rows[0]!.stale ? 'done' : 'more' };
}
