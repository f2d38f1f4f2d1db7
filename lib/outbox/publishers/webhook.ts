import { SIGNATURE_HEADER, sign } from '../../shared/signature.ts';
import { classifyFetchError, type FailureKind } from '../classify.ts';
import type { OutRecord, Publisher, PublishResult } from '../types.ts';
import { HEADER_EVENT_ID, HEADER_EVENT_TYPE } from '../types.ts';

export { SIGNATURE_HEADER, sign as signBody };

export interface WebhookPublisherOptions {
  url: string;
  /** MSGX_SIGNING_SECRET; without it no signature header is sent. */
  signingSecret?: string;
  /** Deadline of one POST (the batch as a whole is bounded by the dispatcher's signal). */
  timeoutMs: number;
  name?: string;
  fetch?: typeof fetch;
}

/**
 * POSTs each record as JSON `{eventId, type, key, value, headers}` to one URL, one at a time in
 * event_id order; 2xx is success. It stops at the first failure: the records after it are
 * reported failed without being sent, so the receiver never sees an event overtake a failed one.
 * Any HTTP answer other than 2xx is the event's failure (an attempt); a refused connection or
 * unknown host is an outage; a timeout is settled by probe() (docs/outbox.md).
 */
class PostError extends Error {
  constructor(
    message: string,
    readonly kind: FailureKind,
  ) {
    super(message);
    this.name = 'PostError';
  }
}

export class WebhookPublisher implements Publisher {
  readonly name: string;
  readonly #o: WebhookPublisherOptions;
  readonly #fetch: typeof fetch;

  constructor(options: WebhookPublisherOptions) {
    const u = new URL(options.url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`webhook ${options.url}: must be http(s)`);
    this.#o = options;
    this.#fetch = options.fetch ?? fetch;
    this.name = options.name ?? `webhook:${u.origin}${u.pathname}`;
  }

  async publish(records: OutRecord[], signal: AbortSignal): Promise<PublishResult[]> {
    const results: PublishResult[] = [];
    let failure: string | null = null;
    for (const r of records) {
      if (failure) {
        results.push({ ok: false, error: `not sent: an earlier event failed (${failure})`, notAttempted: true });
        continue;
      }
      try {
        await this.#post(r, signal);
        results.push({ ok: true });
      } catch (err) {
        failure = err instanceof Error ? err.message : String(err);
        const kind = err instanceof PostError ? err.kind : 'event';
        results.push({ ok: false, error: failure, unavailable: kind === 'outage', timedOut: kind === 'timeout' });
      }
    }
    return results;
  }

  async #post(r: OutRecord, signal: AbortSignal): Promise<void> {
    const body = JSON.stringify({ eventId: r.eventId, type: r.type, key: r.key, value: r.value, headers: r.headers });
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      [HEADER_EVENT_ID]: String(r.eventId),
      [HEADER_EVENT_TYPE]: r.type,
    };
    if (this.#o.signingSecret) headers[SIGNATURE_HEADER] = sign(this.#o.signingSecret, body);
    const res = await this.#fetch(this.#o.url, {
      method: 'POST',
      headers,
      body,
      redirect: 'manual',
      signal: AbortSignal.any([signal, AbortSignal.timeout(this.#o.timeoutMs)]),
    }).catch((err: Error) => {
      const cause = (err as { cause?: Error }).cause;
      const kind = classifyFetchError(err);
      throw new PostError(
        `POST ${this.#o.url}: ${kind === 'timeout' && !cause ? 'timeout' : err.message}${cause ? ` (${cause.message})` : ''}`,
        kind,
      );
    });
    // Drain the body so the connection can be reused; its content does not matter.
    await res.arrayBuffer().catch(() => {});
    if (res.status < 200 || res.status > 299) throw new PostError(`POST ${this.#o.url}: HTTP ${res.status}`, 'event');
  }

  /** Any HTTP answer to a HEAD of the URL (even 404 or 405) means the receiver is there. */
  async probe(signal: AbortSignal): Promise<void> {
    const res = await this.#fetch(this.#o.url, { method: 'HEAD', redirect: 'manual', signal });
    await res.arrayBuffer().catch(() => {});
  }

  async close(): Promise<void> {}
}
