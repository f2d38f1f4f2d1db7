import { randomUUID } from 'node:crypto';
import type { TxStatus } from './states.ts';
import type { TxMessageView } from './view.ts';

/**
 * Typed client for producers and consumers of transactional messages. It depends on nothing
 * else in msgx, so a service can copy or import it alone.
 */
export interface PrepareArgs {
  topic: string;
  key?: string | null;
  /** Sent as JSON text; a string as is. */
  payload: unknown;
  headers?: Record<string, string>;
  /** The producer's check-back endpoint: msgx calls `GET {checkUrl}?id={id}`. */
  checkUrl: string;
  checkAfterMs?: number;
  checkTimeoutMs?: number;
  /** The business the message belongs to (up to 70 characters), shown to operators. */
  bizName?: string;
  /** Who created the message (a user or service id, up to 70 characters), shown to operators. */
  createdBy?: string;
  /** Makes a retried prepare return the same message; withTxMessage generates one when absent. */
  idempotencyKey?: string;
}

export interface TxRef {
  id: string;
  status: TxStatus;
}

/** Base of every client error. `retriable` is true when the same call may succeed later. */
export class TxClientError extends Error {
  readonly retriable: boolean = false;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** msgx answered and refused (4xx): retrying the same call will not help. */
export class TxRejectedError extends TxClientError {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    /** The message's state, on a 409 impossible transition. */
    readonly state?: TxStatus,
  ) {
    super(`msgx refused (${status} ${code}): ${detail}`);
  }
}

/** msgx could not be reached, timed out, or failed (5xx): the outcome of the call is unknown. */
export class TxUnavailableError extends TxClientError {
  override readonly retriable = true;
}

export interface TxClientOptions {
  /** e.g. http://127.0.0.1:8080 */
  baseUrl: string;
  /** Per request; default 5000 ms. */
  timeoutMs?: number;
  /** Extra tries of a retriable failure; default 2. Every call is safe to retry (see prepare). */
  retries?: number;
  /** Wait between tries; default 200 ms. */
  retryDelayMs?: number;
  /** Extra headers on every call (e.g. Authorization). */
  headers?: Record<string, string>;
  fetch?: typeof fetch;
  /**
   * Told about a commit or rollback that withTxMessage could not deliver. Not an error for the
   * caller: msgx's check-back asks the producer and settles the message anyway.
   */
  onSettleError?: (err: TxClientError, op: 'commit' | 'rollback', id: string) => void;
}

export class TxMessageClient {
  readonly #o: Required<Omit<TxClientOptions, 'onSettleError' | 'headers' | 'fetch'>> & TxClientOptions;

  constructor(options: TxClientOptions) {
    this.#o = { timeoutMs: 5000, retries: 2, retryDelayMs: 200, ...options, baseUrl: options.baseUrl.replace(/\/+$/, '') };
  }

  /** Stores a half message (PREPARED). Retried with the same Idempotency-Key, so never duplicated. */
  prepare(args: PrepareArgs): Promise<TxRef> {
    const { idempotencyKey, ...body } = args;
    const key = idempotencyKey ?? randomUUID();
    return this.#call<TxRef>('POST', '/v1/tx-messages', body, { 'idempotency-key': key });
  }

  commit(id: string): Promise<TxRef> {
    return this.#call('POST', `/v1/tx-messages/${encodeURIComponent(id)}/commit`);
  }

  rollback(id: string): Promise<TxRef> {
    return this.#call('POST', `/v1/tx-messages/${encodeURIComponent(id)}/rollback`);
  }

  /** The consumer confirms it consumed the message (the `msgx-txmsg-id` header of the record). */
  ack(id: string): Promise<TxRef> {
    return this.#call('POST', `/v1/tx-messages/${encodeURIComponent(id)}/ack`);
  }

  get(id: string): Promise<TxMessageView> {
    return this.#call('GET', `/v1/tx-messages/${encodeURIComponent(id)}`);
  }

  /**
   * The producer's whole protocol (docs/txmsg.md "Client"): prepare, run the local transaction, then commit —
   * or roll back when it throws. The local transaction must record `msg.id` in its own data so
   * the check-back endpoint can answer COMMIT for it (and ROLLBACK when no such record exists).
   *
   * - prepare fails → throws, the local transaction never runs (failure points 1, 2: docs/txmsg.md "Failure points → tests").
   * - the local transaction throws → rollback is attempted and the original error rethrown (4).
   * - commit or rollback cannot reach msgx → reported to onSettleError only; the caller's
   *   committed work stands and check-back settles the message (5, 6).
   */
  async withTxMessage<T>(args: PrepareArgs, localTx: (msg: TxRef) => Promise<T>): Promise<T> {
    const msg = await this.prepare(args);
    let result: T;
    try {
      result = await localTx(msg);
    } catch (err) {
      await this.rollback(msg.id).catch((e) => this.#settleFailed(e, 'rollback', msg.id));
      throw err;
    }
    await this.commit(msg.id).catch((e) => this.#settleFailed(e, 'commit', msg.id));
    return result;
  }

  #settleFailed(err: unknown, op: 'commit' | 'rollback', id: string): void {
    const e = err instanceof TxClientError ? err : new TxUnavailableError(String(err), { cause: err });
    this.#o.onSettleError?.(e, op, id);
  }

  async #call<T>(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    let last: TxClientError | undefined;
    for (let attempt = 0; attempt <= this.#o.retries; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, this.#o.retryDelayMs * attempt));
      try {
        return await this.#once<T>(method, path, body, headers);
      } catch (err) {
        if (!(err instanceof TxClientError) || !err.retriable) throw err;
        last = err;
      }
    }
    throw last!;
  }

  async #once<T>(method: string, path: string, body: unknown, headers: Record<string, string>): Promise<T> {
    let res: Response;
    try {
      res = await (this.#o.fetch ?? fetch)(this.#o.baseUrl + path, {
        method,
        headers: {
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...this.#o.headers,
          ...headers,
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
    } catch (err) {
      throw new TxUnavailableError(`${method} ${path}: ${(err as Error).message}`, { cause: err });
    }
    const text = await res.text().catch(() => '');
    let parsed: Record<string, unknown> = {};
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch {
      /* a proxy's HTML error page: handled by status below */
    }
    if (res.ok) return parsed as T;
    if (res.status >= 500 || res.status === 429)
      throw new TxUnavailableError(`${method} ${path}: HTTP ${res.status} ${String(parsed.detail ?? '')}`);
    throw new TxRejectedError(
      res.status,
      String(parsed.error ?? 'error'),
      String(parsed.detail ?? text),
      parsed.state as TxStatus | undefined,
    );
  }
}
