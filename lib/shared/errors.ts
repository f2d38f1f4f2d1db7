/**
 * One base class, one subclass per error class of the design. The `message` is the reason
 * that ends up in `proc_state.error_detail` and in API responses.
 */
export type ErrorClass = 'MALFORMED' | 'PROTOCOL' | 'CODEC_ERROR' | 'UNSUPPORTED' | 'INFRA' | 'EXHAUSTED';

export abstract class MsgxError extends Error {
  abstract readonly errorClass: ErrorClass;
  /** Retriable errors leave a message FAILED (holding the head) until its backoff is due. */
  abstract readonly retriable: boolean;
  /**
   * False for an outage or a dependency not ready yet: the message is not at fault, so the head
   * waits without spending an attempt (an outage of minutes must kill nothing).
   */
  readonly countsAttempt: boolean = true;

  constructor(reason: string, options?: { cause?: unknown }) {
    super(reason, options);
    this.name = new.target.name;
  }
}

export class MalformedError extends MsgxError {
  readonly errorClass = 'MALFORMED' as const;
  readonly retriable = false;
}
export class ProtocolError extends MsgxError {
  readonly errorClass = 'PROTOCOL' as const;
  readonly retriable = false;
}
export class CodecError extends MsgxError {
  readonly errorClass = 'CODEC_ERROR' as const;
  readonly retriable = true;
}
export class UnsupportedError extends MsgxError {
  readonly errorClass = 'UNSUPPORTED' as const;
  readonly retriable = true;
}
export class InfraError extends MsgxError {
  readonly errorClass = 'INFRA' as const;
  readonly retriable = true;
}

/**
 * Something the message needs is unreachable or not ready yet (a database connection lost, a
 * request still being reconciled against COUTMSGS): INFRA, retried, but no attempt is spent.
 */
export class NotReadyError extends InfraError {
  override readonly countsAttempt = false;
}

/**
 * A bug in msgx met while handling a message (a TypeError, a RangeError …). The same code on the
 * same message fails the same way, so it is not retried: the message is DEAD at once under the
 * class of the stage that failed (CODEC_ERROR while decoding, UNSUPPORTED while processing), both
 * replayable once the code is fixed. The original error, with its stack, is the cause.
 */
export class ProgrammingError extends MsgxError {
  readonly retriable = false;
  constructor(
    readonly errorClass: 'CODEC_ERROR' | 'UNSUPPORTED',
    err: Error,
  ) {
    super(`programming error (not retried; replay once fixed): ${err.name}: ${err.message}`, { cause: err });
  }
}

/** JavaScript's own error types: thrown by faulty code, never by a driver or the network. */
const PROGRAMMING_ERRORS = [TypeError, ReferenceError, RangeError, SyntaxError, EvalError, URIError];

export const isProgrammingError = (err: unknown): err is Error =>
  err instanceof Error && !(err instanceof MsgxError) && PROGRAMMING_ERRORS.some((t) => err instanceof t);

// PostgreSQL SQLSTATE classes of an unreachable or overloaded server (connection exception,
// insufficient resources, operator intervention, system error), and the socket errors of Node and
// the drivers: the server is away, the statement was not at fault.
const OUTAGE_SQLSTATE = /^(08|53|57P|58)/;
const OUTAGE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'PROTOCOL_CONNECTION_LOST',
]);
// pg's own messages for a connection that went away (they carry no code).
const OUTAGE_MESSAGE =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error/i;

/** True for an error that says a server is unreachable, rather than that the work was wrong. */
export function isOutage(err: unknown): boolean {
  if (err instanceof MsgxError) return !err.countsAttempt;
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (OUTAGE_CODES.has(code) || (code.length === 5 && OUTAGE_SQLSTATE.test(code)))) return true;
  if (OUTAGE_MESSAGE.test(err.message)) return true;
  return err.cause !== undefined && err.cause !== err && isOutage(err.cause);
}

/**
 * Anything that is not one of ours: a programming error is the message's failure at `stage`
 * (ProgrammingError, not retried); an outage is INFRA that spends no attempt; any other foreign
 * error (a constraint a statement broke, a driver's complaint) is INFRA, retried and counted.
 */
export function asMsgxError(err: unknown, stage: 'decode' | 'process' = 'process'): MsgxError {
  if (err instanceof MsgxError) return err;
  if (isProgrammingError(err)) return new ProgrammingError(stage === 'decode' ? 'CODEC_ERROR' : 'UNSUPPORTED', err);
  const reason = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return isOutage(err) ? new NotReadyError(reason, { cause: err }) : new InfraError(reason, { cause: err });
}

/** Errors of the HTTP API and the CLI: a status, a stable code and the reason. */
export class RequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(`${code}: ${detail}`);
    this.name = 'RequestError';
  }
}

/** Raised at start-up when a setting is missing, malformed or unsafe; names the variable. */
export class ConfigError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ConfigError';
  }
}
