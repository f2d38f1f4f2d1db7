import type { Queryable } from '../db/db.ts';
import type { BackfillMark } from '../mailbox/mailbox.ts';
import type { AppContext } from '../app/context.ts';
import { asMsgxError, type ErrorClass, type MsgxError, ProgrammingError } from '../shared/errors.ts';
import { logProgrammingError } from './stepLog.ts';
import type { Prepared } from './attempt.ts';
import { GroupScope } from './groupScope.ts';
import { noteFor } from './backfill.ts';
import { backoffMs } from '../shared/backoff.ts';
import { type AttemptRecord, lockOpen, type OpenRow, writeAttempts } from './procState.ts';
import { IGNORED_TYPES } from './processor.ts';
import type { ProcStatus } from './states.ts';

export interface GroupResult {
  records: AttemptRecord[];
  /** Terminal outcomes to write to the mailbox after commit. */
  marks: BackfillMark[];
  /** True when a message failed and now holds the head. */
  stopped: boolean;
}

type Outcome =
  | { status: 'SUCCEEDED' | 'SKIPPED'; note: string | null }
  | { status: 'DEAD'; errorClass: ErrorClass; detail: string }
  /** `counted: false`: an outage or a dependency not ready; the head waits, no attempt is spent. */
  | { status: 'FAILED'; errorClass: ErrorClass; detail: string; counted?: false };

/**
 * Applies a run of consecutive head messages in ONE transaction (group commit), each under its own
 * savepoint, so a failing message rolls back alone and none is ever partly applied. Stops at the
 * first retriable failure: nothing behind a FAILED head may overtake it.
 */
export async function applyGroup(
  ctx: AppContext,
  tx: Queryable,
  group: Prepared[],
  now: Date,
  options: { deferWrites?: boolean } = {},
): Promise<GroupResult> {
  const { config } = ctx;
  const { locked, holders } = await lockOpen(
    tx,
    group.map((g) => g.msgId),
    group.flatMap((g) => (g.decoded ? [g.decoded.identity] : [])),
  );
  const boundHere = new Map<string, number>();
  const scope = options.deferWrites === false ? undefined : deferredScope(ctx, tx, group);
  const records: AttemptRecord[] = [];
  let stopped = false;
  // An attempt's real start: the first message's is the step's start (its mailbox read and decode
  // were part of it), each next one starts when the one before it finished.
  let cursor = now;

  for (const item of group) {
    const row = locked.get(item.msgId);
    if (!row) break; // moved by someone else (replay, another pump): keep FIFO, stop here
    const startedAt = cursor;
    let identity: string | null = row.identity_key;
    let outcome: Outcome;

    if (item.error) {
      outcome = failure(ctx, item.msgId, item.error);
    } else {
      const msg = item.decoded;
      // Bind the identity once; a retry keeps its own binding and never sees itself as a duplicate.
      if (!identity) {
        const holder = boundHere.get(msg.identity) ?? holders.get(msg.identity);
        if (holder !== undefined && holder !== row.msg_id) {
          cursor = ctx.clock.now();
          records.push(
            record(
              row,
              { status: 'SKIPPED', note: `duplicate-of:${holder}` },
              { item, identity: null, startedAt, finishedAt: cursor },
              config.pipeline,
            ),
          );
          continue;
        }
        identity = msg.identity;
        boundHere.set(msg.identity, row.msg_id);
      }
      outcome = await runProcessor(ctx, tx, item, now, scope);
    }

    cursor = ctx.clock.now();
    const rec = record(row, outcome, { item, identity, startedAt, finishedAt: cursor }, config.pipeline);
    records.push(rec);
    // Its death releases the identity (writeAttempts clears it): a later copy in this group may bind it.
    if (rec.status === 'DEAD' && identity && boundHere.get(identity) === row.msg_id) boundHere.delete(identity);
    if (rec.status === 'FAILED') {
      stopped = true;
      break;
    }
  }

  // Deferred domain writes (one statement per module) go in before the states that report them.
  await scope?.flush();
  const marks = config.shadow ? [] : mailboxMarks(records);
  await writeAttempts(tx, records, marks);
  return { records, marks, stopped };
}

/**
 * Deferred writes are the fast path; without them every write happens inside its message's
 * savepoint, which the pump falls back to when a deferred write fails at the end of a group.
 */
function deferredScope(ctx: AppContext, tx: Queryable, group: Prepared[]): GroupScope {
  return new GroupScope(
    tx,
    group.flatMap((g) => (g.decoded ? [g.decoded] : [])),
    ctx.db,
  );
}

/** The terminal outcomes the mailbox is told of after commit (shadow mode tells it nothing). */
function mailboxMarks(records: AttemptRecord[]): BackfillMark[] {
  return records
    .filter((r) => r.status !== 'FAILED' && r.status !== 'PENDING')
    .map((r) => ({
      id: r.msgId,
      status: r.status,
      note: noteFor(r.status, r.errorClass, r.errorDetail, r.note),
      processedAt: r.finishedAt,
    }));
}

async function runProcessor(ctx: AppContext, tx: Queryable, item: Prepared, now: Date, scope: GroupScope | undefined): Promise<Outcome> {
  const msg = item.decoded!;
  if (IGNORED_TYPES.has(msg.type)) return { status: 'SKIPPED', note: `ignored-type:${msg.type}` };
  const processor = ctx.registry.resolve(msg);
  if (!processor)
    return { status: 'FAILED', errorClass: 'UNSUPPORTED', detail: `no processor for ${msg.type}${msg.subtype ? `/${msg.subtype}` : ''}` };
  // The savepoint is taken lazily, at the processor's first statement: a message that only works
  // through the group's unit of work (the common FLOP) costs no round trip at all.
  const savepoint = lazySavepoint(tx);
  scope?.begin();
  try {
    const r = await processor({ tx: savepoint.tx, msgId: item.msgId, message: msg, now, config: ctx.config, group: scope });
    await savepoint.release();
    scope?.commit();
    return { status: r.status, note: r.note ?? null };
  } catch (err) {
    // Roll back only this message's writes, in SQL and in the group's unit of work; the group's
    // earlier messages stay applied.
    scope?.rollback();
    await savepoint.rollback();
    return failure(ctx, item.msgId, asMsgxError(err));
  }
}

function failure(ctx: AppContext, msgId: number, e: MsgxError): Outcome {
  if (e instanceof ProgrammingError) logProgrammingError(ctx.log, msgId, e);
  if (!e.retriable) return { status: 'DEAD', errorClass: e.errorClass, detail: e.message };
  return e.countsAttempt
    ? { status: 'FAILED', errorClass: e.errorClass, detail: e.message }
    : { status: 'FAILED', errorClass: e.errorClass, detail: e.message, counted: false };
}

function lazySavepoint(tx: Queryable) {
  let taken = false;
  return {
    tx: {
      async query<T>(sql: string, params?: unknown[]) {
        if (!taken) {
          await tx.query('SAVEPOINT msgx_msg');
          taken = true;
        }
        return tx.query<T>(sql, params);
      },
    },
    release: async () => {
      if (taken) await tx.query('RELEASE SAVEPOINT msgx_msg');
    },
    rollback: async () => {
      if (taken) await tx.query('ROLLBACK TO SAVEPOINT msgx_msg');
    },
  };
}

/** One attempt of one message: what it ran on, the identity it binds, when it started and finished. */
export interface AttemptRun {
  item: Prepared;
  identity: string | null;
  startedAt: Date;
  finishedAt: Date;
}

type RetryRule = Pick<AppContext['config']['pipeline'], 'maxAttempts' | 'headDeadlineMs' | 'backoffInitialMs' | 'backoffMaxMs'>;

/**
 * Turns an outcome into the row update, applying the attempt limit and the head deadline.
 * The next attempt and the deadline count from when the attempt finished.
 */
export function record(row: OpenRow, outcome: Outcome, run: AttemptRun, rule: RetryRule): AttemptRecord {
  const counted = !('counted' in outcome && outcome.counted === false);
  const attempt = counted ? row.attempts + 1 : row.attempts;
  const firstAttemptAt = row.first_attempt_at ?? run.startedAt;
  const verdict =
    outcome.status === 'FAILED'
      ? retryVerdict(outcome, { attempt, counted, firstAttemptAt, now: run.finishedAt }, rule)
      : {
          status: outcome.status,
          errorClass: 'errorClass' in outcome ? outcome.errorClass : null,
          errorDetail: 'detail' in outcome ? outcome.detail : null,
          nextAttemptAt: run.finishedAt,
        };
  return {
    msgId: row.msg_id,
    ...verdict,
    attempt,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
    firstAttemptAt,
    note: 'note' in outcome ? outcome.note : null,
    identity: run.identity,
    rawText: run.item.rawText,
    type: run.item.decoded?.type ?? null,
    subtype: run.item.decoded?.subtype ?? null,
  };
}

/** A failed attempt: retried after its backoff, or DEAD once the attempts or the head deadline run out. */
function retryVerdict(
  outcome: Extract<Outcome, { status: 'FAILED' }>,
  a: { attempt: number; counted: boolean; firstAttemptAt: Date; now: Date },
  rule: RetryRule,
): { status: ProcStatus; errorClass: ErrorClass; errorDetail: string; nextAttemptAt: Date } {
  const waited = a.now.getTime() - a.firstAttemptAt.getTime();
  const pastDeadline = waited >= rule.headDeadlineMs;
  const attempts = `${a.attempt} attempt${a.attempt === 1 ? '' : 's'}`;
  if (!a.counted) {
    // Not the message's fault: no attempt is spent and the attempt limit does not apply; the head
    // deadline still does. The wait grows with the time waited so far (initial … max backoff).
    if (pastDeadline) return dead(`${outcome.errorClass}: ${outcome.detail} (after ${attempts}, head deadline passed)`, a.now);
    const wait = Math.min(rule.backoffMaxMs, Math.max(rule.backoffInitialMs, waited));
    return {
      status: 'FAILED',
      errorClass: outcome.errorClass,
      errorDetail: `${outcome.detail} (no attempt counted)`,
      nextAttemptAt: new Date(a.now.getTime() + wait),
    };
  }
  if (a.attempt >= rule.maxAttempts || pastDeadline)
    return dead(`${outcome.errorClass}: ${outcome.detail} (after ${attempts}${pastDeadline ? ', head deadline passed' : ''})`, a.now);
  const wait = backoffMs(a.attempt, rule.backoffInitialMs, rule.backoffMaxMs);
  return { status: 'FAILED', errorClass: outcome.errorClass, errorDetail: outcome.detail, nextAttemptAt: new Date(a.now.getTime() + wait) };
}

function dead(errorDetail: string, now: Date) {
  return { status: 'DEAD' as const, errorClass: 'EXHAUSTED' as const, errorDetail, nextAttemptAt: now };
}
