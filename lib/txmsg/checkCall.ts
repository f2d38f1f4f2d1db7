import { TXMSG_ID_HEADER } from './delivery.ts';
import { SIGNATURE_HEADER, sign } from '../shared/signature.ts';
import type { TxRow } from './store.ts';
import { checkCheckUrl } from './validate.ts';

export type CheckAnswer = 'COMMIT' | 'ROLLBACK' | 'UNKNOWN';

/** What one check-back call produced: the producer's answer, or why there is none. */
export type CheckOutcome = { answer: CheckAnswer; ms: number } | { error: string; ms: number };

const MAX_ANSWER_BYTES = 16 * 1024;

/** The exact URL called: checkUrl with `id` set (any query the producer put there is kept). */
export function checkUrlFor(row: Pick<TxRow, 'id' | 'check_url'>): string {
  const url = new URL(row.check_url);
  url.searchParams.set('id', row.id);
  return url.toString();
}

/**
 * `GET {checkUrl}?id={id}` with the message's own timeout, redirects NOT followed (a redirect
 * could lead msgx to an origin the operator never allowed), the origin re-checked against the
 * current allow-list, and the URL signed when MSGX_SIGNING_SECRET is set. Never throws.
 * Must be called outside any database transaction: the producer may take seconds to answer.
 */
export async function callCheckBack(
  row: Pick<TxRow, 'id' | 'check_url' | 'check_timeout_ms'>,
  options: { allowedOrigins: string[]; signingSecret?: string; fetch?: typeof fetch },
): Promise<CheckOutcome> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  let url: string;
  try {
    checkCheckUrl(row.check_url, options.allowedOrigins);
    url = checkUrlFor(row);
  } catch (err) {
    return { error: `not called: ${(err as Error).message}`, ms: 0 };
  }
  const headers: Record<string, string> = { accept: 'application/json', [TXMSG_ID_HEADER]: row.id };
  if (options.signingSecret) headers[SIGNATURE_HEADER] = sign(options.signingSecret, url);
  try {
    const res = await (options.fetch ?? fetch)(url, {
      method: 'GET',
      headers,
      redirect: 'manual',
      signal: AbortSignal.timeout(row.check_timeout_ms),
    });
    if (res.status < 200 || res.status > 299) {
      await res.body?.cancel().catch(() => {});
      return { error: `HTTP ${res.status}${res.status >= 300 && res.status < 400 ? ' (redirects are not followed)' : ''}`, ms: ms() };
    }
    const text = await readCapped(res);
    let status: unknown;
    try {
      status = (JSON.parse(text) as { status?: unknown })?.status;
    } catch {
      return { error: 'answer is not JSON', ms: ms() };
    }
    if (status === 'COMMIT' || status === 'ROLLBACK' || status === 'UNKNOWN') return { answer: status, ms: ms() };
    return { error: `answer has no valid status (got ${JSON.stringify(status)?.slice(0, 40)})`, ms: ms() };
  } catch (err) {
    const e = err as Error;
    const timedOut = e.name === 'TimeoutError' || e.name === 'AbortError';
    return { error: timedOut ? `timed out after ${row.check_timeout_ms} ms` : `unreachable: ${e.message}${causeOf(e)}`, ms: ms() };
  }
}

async function readCapped(res: Response): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_ANSWER_BYTES) {
      await reader.cancel().catch(() => {});
      throw new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

const causeOf = (e: Error) => (e.cause instanceof Error ? ` (${e.cause.message})` : '');
