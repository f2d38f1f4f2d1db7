/**
 * One base class, one subclass per error class of the design. The `message` is the reason
 * that ends up in `proc_state.error_detail` and in API responses.
 */
export type ErrorClass = 'MALFORMED' | 'PROTOCOL' | 'CODEC_ERROR' | 'UNSUPPORTED' | 'INFRA' | 'EXHAUSTED';

export abstract class MsgxError extends Error {
  abstract readonly errorClass: ErrorClass;
  /** Retriable errors leave a message FAILED (holding the head) until its backoff is due. */
  abstract readonly retriable: boolean;

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

/** Anything that is not one of ours (a driver error, a TypeError) is treated as INFRA. */
export function asMsgxError(err: unknown): MsgxError {
  if (err instanceof MsgxError) return err;
  const reason = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return new InfraError(reason, { cause: err });
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
