import type { AppContext } from '../app/context.ts';
import type { MailboxText } from '../mailbox/mailbox.ts';
import { asMsgxError, isOutage } from '../shared/errors.ts';
import { decodeOptionsKey, type Prepared, prepare } from './attempt.ts';
import { forgetDecoded, keepDecoded, knowsDecoded } from './decodeCache.ts';
import { decodeOffThread, OFF_THREAD_CHARS } from './offThread.ts';
import { backfillNow, noteFor } from './backfill.ts';
import { takeEnqueued } from './justEnqueued.ts';
import { applyGroup, type GroupResult, record } from './group.ts';
import { holdHead, type OpenRow, readHead, writeAttempts } from './procState.ts';
import { logFailedAttempts, logPumpStep, since } from './stepLog.ts';

export type PumpStep =
  /**
   * `drained`: the last head read returned no more than the step applied (nothing else open up to
   * the frontier, nothing held back): the next open row can only come with a wake-up (the poller's
   * or a replay's NOTIFY), so the caller may rest instead of reading the head again at once.
   */
  | { kind: 'processed'; count: number; stopped: boolean; drained?: boolean }
  | { kind: 'idle' }
  /** Open messages exist, but above the mailbox frontier: the poller wakes the pump when it moves. */
  | { kind: 'held'; msgId: number }
  | { kind: 'paused' }
  | { kind: 'waiting'; untilMs: number; msgId: number };

/**
 * Groups per step of the pump role: enough to keep the mailbox read, the commit and the back-fill
 * overlapping under a backlog, few enough that a step of 50-message groups ends well within a
 * second (a Lambda's budget is checked between steps).
 */
export const GROUPS_PER_STEP = 8;

/**
 * A group stops taking more messages once preparing it (mailbox text aside) has taken this long;
 * the rest go in the next group. With the yields below, no stretch of pump work holds the event
 * loop much longer than one message's decode, so the twin's /health and API keep answering
 * within 100 ms whatever is queued.
 */
export const PREPARE_SLICE_MS = 50;
/** CPU work in a row before the pump lets the event loop answer other work (timers, sockets). */
const YIELD_EVERY_MS = 20;
const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export interface PumpOptions {
  /**
   * Groups applied in this step (default 1). Beyond the first, each group's mailbox read and
   * decode run while the group before it commits, and each back-fill while the next group is
   * read and applied; the step returns once every group's back-fill is done.
   */
  maxGroups?: number;
}

/**
 * One step of the FIFO pump: the smallest open message is the head (PENDING and FAILED both hold
 * it). A FAILED head not yet due makes the pump wait; otherwise the head and the due run behind it
 * are applied in one transaction, then up to `maxGroups - 1` further runs. The caller holds the
 * pump's advisory lock.
 */
export async function pumpOnce(ctx: AppContext, options: PumpOptions = {}): Promise<PumpStep> {
  const maxGroups = Math.max(1, options.maxGroups ?? 1);
  const lookahead = new Lookahead();
  // Woken by this process's poller: its new rows' texts are read while the head is.
  lookahead.start(
    ctx,
    takeEnqueued(ctx.mailbox).map((id) => ({ msg_id: id, raw_text: null })),
  );
  // One back-fill at a time, in commit order. A mailbox failure is handled inside (the sweep
  // retries); anything else fails the step once every back-fill has had its turn.
  let backfilling: Promise<void> = Promise.resolve();
  let backfillError: unknown;
  const backfill = (marks: GroupResult['marks'], now: Date) =>
    (backfilling = backfilling.then(() =>
      backfillNow(ctx, marks, now).then(
        () => {},
        (err: unknown) => void (backfillError ??= err),
      ),
    ));
  let processed = 0;
  let step: PumpStep;
  try {
    for (let g = 1; ; g++) {
      // Between groups the event loop gets a turn: a step of many groups never starves it.
      if (g > 1) await yieldToLoop();
      const next = await applyNextGroup(ctx, lookahead, g < maxGroups, backfill);
      if (next.kind !== 'processed') {
        step = processed > 0 ? { kind: 'processed', count: processed, stopped: false } : next;
        break;
      }
      processed += next.count;
      if (next.stopped || next.drained || g >= maxGroups) {
        step = { kind: 'processed', count: processed, stopped: next.stopped, drained: next.drained === true };
        break;
      }
    }
  } finally {
    await backfilling;
  }
  if (backfillError !== undefined) throw backfillError as Error; // whatever the back-fill threw, passed on as it came
  return step;
}

/** Prepared messages read and decoded ahead, while the group before them commits. */
class Lookahead {
  readonly #ahead = new Map<number, Promise<Prepared | undefined>>();

  /** Reads and decodes `rows` in the background (a failure only means they are read again). */
  start(ctx: AppContext, rows: Pick<OpenRow, 'msg_id' | 'raw_text'>[]): void {
    this.#ahead.clear();
    if (rows.length === 0) return;
    const all = prepareGroup(ctx, rows).catch(() => undefined);
    rows.forEach((r, i) =>
      this.#ahead.set(
        r.msg_id,
        all.then((p) => p?.[i]),
      ),
    );
  }

  /**
   * The group prepared: what was read ahead where it succeeded, the rest now. May be a prefix of
   * `group` when preparing it took longer than PREPARE_SLICE_MS; never empty.
   */
  async prepare(ctx: AppContext, group: OpenRow[]): Promise<Prepared[]> {
    const ready = await Promise.all(group.map((r) => this.#ahead.get(r.msg_id) ?? Promise.resolve(undefined)));
    this.#ahead.clear();
    const missing = group.filter((_, i) => ready[i] === undefined);
    const fresh = missing.length ? await prepareGroup(ctx, missing) : [];
    const out: Prepared[] = [];
    let k = 0;
    for (let i = 0; i < group.length; i++) {
      const p = ready[i] ?? fresh[k++];
      if (!p) break; // cut by the time slice: nothing behind it may go first
      out.push(p);
    }
    return out;
  }
}

async function applyNextGroup(
  ctx: AppContext,
  lookahead: Lookahead,
  more: boolean,
  backfill: (marks: GroupResult['marks'], now: Date) => Promise<void>,
): Promise<PumpStep> {
  const now = ctx.clock.now();
  const t0 = performance.now();
  const groupCommit = ctx.config.pipeline.groupCommit;
  // With more groups to come, the next group's rows are read too, to be prepared ahead.
  const limit = more ? groupCommit * 2 : groupCommit;
  const { paused, rows, heldBack } = await readHead(ctx.db, limit);
  const readHeadMs = since(t0);
  if (paused) return { kind: 'paused' };
  const head = rows[0];
  if (!head) return heldBack === null ? { kind: 'idle' } : { kind: 'held', msgId: heldBack };
  if (head.status === 'FAILED' && head.next_attempt_at.getTime() > now.getTime())
    return { kind: 'waiting', untilMs: head.next_attempt_at.getTime(), msgId: head.msg_id };

  // Only the head may be FAILED. Should another FAILED row ever sit behind it (a replay race), the
  // group stops before it: nothing overtakes a failure.
  const firstGap = rows.findIndex((r, i) => i > 0 && (r.status !== 'PENDING' || i >= groupCommit));
  const group = firstGap > 0 ? rows.slice(0, firstGap) : rows;

  let prepared: Prepared[];
  const tPrepare = performance.now();
  try {
    prepared = await lookahead.prepare(ctx, group);
  } catch (err) {
    // A mailbox read error is INFRA, never "missing". It is an outage, not a fault of the message:
    // the head shows FAILED(INFRA) and waits, but no attempt is counted, so an outage of minutes
    // kills nothing (it would otherwise exhaust one head after another).
    const untilMs = now.getTime() + ctx.config.pipeline.backoffInitialMs;
    await holdHead(ctx.db, head.msg_id, `mailbox read failed: ${asMsgxError(err).message}`, new Date(untilMs), now);
    // Same fields as a failed attempt, though none is counted (README "Operations", Logs).
    ctx.log.warn({
      message: 'mailbox read failed; the head waits',
      msg_id: head.msg_id,
      error_class: 'INFRA',
      attempt: head.attempts,
      next_attempt_at: new Date(untilMs).toISOString(),
      error: String(err),
    });
    return { kind: 'waiting', untilMs, msgId: head.msg_id };
  }
  const prepareMs = since(tPrepare);

  if (more)
    lookahead.start(
      ctx,
      rows.slice(prepared.length).filter((r) => r.status === 'PENDING'),
    );
  const tCommit = performance.now();
  const committed = await commitGroup(ctx, prepared, now);
  const commitMs = since(tCommit);
  if ('error' in committed) {
    if (committed.outage) {
      // The database went away mid-transaction: an outage, not the head's fault (no attempt counted).
      const untilMs = ctx.clock.now().getTime() + ctx.config.pipeline.backoffInitialMs;
      await holdHead(ctx.db, head.msg_id, `transaction failed: ${committed.error} (no attempt counted)`, new Date(untilMs), now).catch(
        () => {},
      );
      return { kind: 'processed', count: 0, stopped: true };
    }
    await failHead(ctx, head, `transaction failed: ${committed.error}`, now).catch(() => {});
    return { kind: 'processed', count: 0, stopped: true };
  }
  const result = committed.result;
  for (const r of result.records) if (r.status !== 'FAILED') forgetDecoded(r.msgId);
  logFailedAttempts(ctx.log, result.records);
  const tBackfill = performance.now();
  const backfilled = backfill(result.marks, now);
  // The last group of a step waits for its back-fill here; earlier ones overlap the next group.
  if (!more || result.stopped) await backfilled;
  logPumpStep(ctx.log, {
    processed: result.records.length,
    stopped: result.stopped,
    head: head.msg_id,
    read_head_ms: readHeadMs,
    prepare_ms: prepareMs,
    commit_ms: commitMs,
    backfill_ms: since(tBackfill),
    total_ms: since(t0),
  });
  // Every open row the head read saw is now applied: reading the head again would find only what
  // was enqueued since, and whoever enqueues wakes the pump.
  const drained = !result.stopped && heldBack === null && rows.length < limit && result.records.length === rows.length;
  return { kind: 'processed', count: result.records.length, stopped: result.stopped, drained };
}

/**
 * Commits the group, falling back step by step so that a failure lands on the message that
 * caused it, never on an innocent head:
 * 1. the whole group with deferred writes (the fast path);
 * 2. the whole group with every write inside its own message's savepoint (a deferred write that
 *    failed at the end of the group fails only its message now);
 * 3. the head alone (something no savepoint contains, e.g. a value PostgreSQL cannot store in the
 *    group's outcome statement: the head is applied, and the culprit becomes the next head).
 * An error when even the head alone fails (commit failed, connection lost): nothing applied.
 */
async function commitGroup(
  ctx: AppContext,
  prepared: Prepared[],
  now: Date,
): Promise<{ result: GroupResult } | { error: string; outage: boolean }> {
  const attempts: [Prepared[], { deferWrites?: boolean }][] = [
    [prepared, {}],
    [prepared, { deferWrites: false }],
    ...(prepared.length > 1 ? [[prepared.slice(0, 1), { deferWrites: false }] as [Prepared[], { deferWrites?: boolean }]] : []),
  ];
  let last: unknown;
  for (const [group, options] of attempts) {
    try {
      return { result: await ctx.db.tx((tx) => applyGroup(ctx, tx, group, now, options)) };
    } catch (err) {
      last = err;
      ctx.log.warn('pump group failed; falling back', { head: group[0]?.msgId, size: group.length, error: String(err) });
    }
  }
  return { error: asMsgxError(last).message, outage: isOutage(last) };
}

/**
 * Reads the texts the group lacks, then decodes in order until PREPARE_SLICE_MS is spent (at least
 * one message), yielding to the event loop every YIELD_EVERY_MS: a run of megabyte messages costs
 * several short groups, never one long block.
 */
async function prepareGroup(ctx: AppContext, group: Pick<OpenRow, 'msg_id' | 'raw_text'>[]): Promise<Prepared[]> {
  const missing = group.filter((r) => r.raw_text === null).map((r) => r.msg_id);
  const texts = missing.length ? await ctx.mailbox.readTexts(missing) : new Map<number, MailboxText>();
  const { timezone } = ctx.config;
  const maxBytes = ctx.config.http.maxBodyBytes;
  const dayBoundary = ctx.config.pipeline.identityDayBoundary;
  const out: Prepared[] = [];
  const t0 = performance.now();
  let ran = t0;
  for (const r of group) {
    const now = performance.now();
    if (out.length > 0 && now - t0 >= PREPARE_SLICE_MS) break;
    if (now - ran >= YIELD_EVERY_MS) {
      await yieldToLoop();
      ran = performance.now();
    }
    const text = r.raw_text ?? texts.get(r.msg_id);
    if (ctx.config.runtime === 'twin' && typeof text === 'string' && text.length >= OFF_THREAD_CHARS) {
      const key = decodeOptionsKey(timezone, maxBytes, dayBoundary);
      if (!knowsDecoded(r.msg_id, text, key)) {
        const learned = await decodeOffThread({ text, timezone, maxBytes, dayBoundary });
        if (learned) keepDecoded(r.msg_id, text, key, learned);
      }
    }
    out.push(prepare(r.msg_id, text, timezone, maxBytes, dayBoundary));
  }
  return out;
}

/** Records an INFRA attempt on the head (or its EXHAUSTED death) in a transaction of its own. */
async function failHead(ctx: AppContext, head: OpenRow, reason: string, now: Date): Promise<void> {
  const error = asMsgxError(reason);
  const item: Prepared = { msgId: head.msg_id, rawText: head.raw_text, error };
  const rec = record(
    head,
    { status: 'FAILED', errorClass: 'INFRA', detail: reason },
    { item, identity: head.identity_key, startedAt: now, finishedAt: ctx.clock.now() },
    ctx.config.pipeline,
  );
  const marks =
    rec.status === 'DEAD' && !ctx.config.shadow
      ? [{ id: rec.msgId, status: rec.status, note: noteFor(rec.status, rec.errorClass, rec.errorDetail, null), processedAt: now }]
      : [];
  await writeAttempts(ctx.db, [rec], marks);
  logFailedAttempts(ctx.log, [rec]);
  await backfillNow(ctx, marks, now);
}
