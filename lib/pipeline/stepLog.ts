import type { Log } from '../observability/logger.ts';
import type { ProgrammingError } from '../shared/errors.ts';
import type { AttemptRecord } from './procState.ts';

/**
 * Per-stage timing lines of the inbox side, like the relay's round log (lib/outbox/roundLog.ts,
 * README "Operations", Logs): where the time of a pump step or an ingress request went.
 * Durations are wall-clock milliseconds (performance.now), whatever clock the pipeline runs on.
 */
export interface PumpTiming {
  /** Messages whose outcome was written this step. */
  processed: number;
  /** A message failed and now holds the head. */
  stopped: boolean;
  head: number;
  read_head_ms: number;
  /** Reading missing texts from the mailbox and decoding, outside any transaction. */
  prepare_ms: number;
  /** The group's transaction, fallbacks included. */
  commit_ms: number;
  backfill_ms: number;
  total_ms: number;
}

export function logPumpStep(log: Log, t: PumpTiming): void {
  log.info({ message: 'pump_step_timing', ...t });
}

export interface IngressTiming {
  msg_id: number;
  /** Content type, size and well-formedness checks. */
  check_ms: number;
  mailbox_ms: number;
  /** The NOTIFY that wakes the poller (docs/ordering.md: the ingress does not enqueue). */
  wake_ms: number;
  woken: boolean;
  total_ms: number;
}

export function logIngress(log: Log, t: IngressTiming): void {
  log.info({ message: 'ingress_timing', ...t });
}

/**
 * Every failed attempt, one line each (README "Operations", Logs): the message, its error class, the attempt
 * count and when the next attempt is due (null when it is now DEAD and there is none).
 */
export function logFailedAttempts(log: Log, records: readonly AttemptRecord[]): void {
  for (const r of records) {
    if (r.status !== 'FAILED' && r.status !== 'DEAD') continue;
    log.warn({
      message: 'pipeline_attempt_failed',
      msg_id: r.msgId,
      status: r.status,
      error_class: r.errorClass,
      error_detail: r.errorDetail,
      attempt: r.attempt,
      next_attempt_at: r.status === 'FAILED' ? r.nextAttemptAt.toISOString() : null,
    });
  }
}

/** Milliseconds since `start` (performance.now), rounded to 0.1 ms. */
export const since = (start: number): number => Math.round((performance.now() - start) * 10) / 10;

/** Bugs already logged with their stack in this process, by name, message and throwing frame. */
const loggedBugs = new Set<string>();
const LOGGED_BUGS_MAX = 500;

/**
 * A programming error met on a message, with its stack, once per bug and process: a bug that hits
 * a thousand messages is one stack in the log (each message still has its own failed-attempt line).
 */
export function logProgrammingError(log: Log, msgId: number, err: ProgrammingError): void {
  const cause = err.cause as Error;
  const frame = cause.stack?.split('\n').find((l) => l.trimStart().startsWith('at ')) ?? '';
  const signature = `${cause.name}|${cause.message}|${frame.trim()}`;
  if (loggedBugs.has(signature)) return;
  if (loggedBugs.size >= LOGGED_BUGS_MAX) loggedBugs.clear();
  loggedBugs.add(signature);
  log.error({
    message: 'programming_error',
    msg_id: msgId,
    error_class: err.errorClass,
    error: `${cause.name}: ${cause.message}`,
    stack: cause.stack,
  });
}
