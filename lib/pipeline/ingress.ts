import { checkWellFormed, DEFAULT_LIMITS } from '../codec/decode.ts';
import type { AppContext } from '../shared/context.ts';
import { MalformedError, RequestError } from '../shared/errors.ts';
import { enqueueMessages } from './procState.ts';
import { logIngress, since } from './stepLog.ts';

/** DESIGN.md: the raw XML body may be declared as any of these (a missing type means text/plain). */
export const XML_TYPES: readonly string[] = ['application/xml', 'text/xml', 'text/plain'];

/**
 * `POST /cminmsgs/send`: refuse bad input before anything is stored, then mailbox insert, then
 * enqueue. The two writes are not one transaction (different databases): if the enqueue fails the
 * row is still in the mailbox and the poller enqueues it, so nothing is lost.
 */
export async function acceptInbound(
  ctx: AppContext,
  body: string,
  contentType: string | undefined,
): Promise<{ msgId: number; enqueued: boolean }> {
  const t0 = performance.now();
  const type = (contentType ?? 'text/plain').split(';')[0]!.trim().toLowerCase();
  if (!XML_TYPES.includes(type))
    throw new RequestError(415, 'unsupported_media_type', `content type ${type} is not accepted; send application/xml, text/xml or text/plain`);
  const limit = ctx.config.http.maxBodyBytes;
  if (Buffer.byteLength(body, 'utf8') > limit)
    throw new RequestError(413, 'payload_too_large', `the body is larger than ${limit} bytes`);
  try {
    checkWellFormed(body, { ...DEFAULT_LIMITS, maxBytes: limit });
  } catch (err) {
    if (err instanceof MalformedError) throw new RequestError(400, 'malformed', err.message);
    throw err;
  }
  const checkMs = since(t0);
  const tMailbox = performance.now();
  const msgId = await ctx.mailbox.insertInbound(body);
  const mailboxMs = since(tMailbox);
  const tEnqueue = performance.now();
  let enqueued = false;
  try {
    const now = ctx.clock.now();
    await ctx.db.tx(async (tx) => {
      // The mailbox row is the durable record; if this commit is lost in a crash, the poller
      // enqueues the row again. So it need not wait for its WAL flush, which keeps the ingress's
      // latency off the disk and lets concurrent enqueues share a flush.
      await tx.query(`SET LOCAL synchronous_commit TO OFF`);
      await enqueueMessages(tx, [{ id: msgId, receivedAt: now }], now);
    });
    enqueued = true;
  } catch (err) {
    ctx.log.warn('enqueue after mailbox insert failed; the poller will find the row', { msgId, error: String(err) });
  }
  logIngress(ctx.log, { msg_id: msgId, check_ms: checkMs, mailbox_ms: mailboxMs, enqueue_ms: since(tEnqueue), enqueued, total_ms: since(t0) });
  return { msgId, enqueued };
}
