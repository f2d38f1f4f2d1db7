import { checkWellFormed, DEFAULT_LIMITS } from '../codec/decode.ts';
import type { AppContext } from '../app/context.ts';
import { MalformedError, RequestError } from '../shared/errors.ts';
import { groupsInbound, storeInboundGrouped } from './ingressBatch.ts';
import { MAILBOX_CHANNEL } from './poller.ts';
import { logIngress, since } from './stepLog.ts';

/** docs/http.md: the raw XML body may be declared as any of these (a missing type means text/plain). */
export const XML_TYPES: readonly string[] = ['application/xml', 'text/xml', 'text/plain'];

/**
 * `POST /cminmsgs/send`: refuse bad input before anything is stored, then the mailbox insert. On
 * the embedded engine concurrent requests share one commit (ingressBatch.ts).
 */
export async function acceptInbound(
  ctx: AppContext,
  body: string,
  contentType: string | undefined,
): Promise<{ msgId: number; woken: boolean }> {
  const t0 = performance.now();
  const type = (contentType ?? 'text/plain').split(';')[0]!.trim().toLowerCase();
  if (!XML_TYPES.includes(type))
    throw new RequestError(
      415,
      'unsupported_media_type',
      `content type ${type} is not accepted; send application/xml, text/xml or text/plain`,
    );
  const limit = ctx.config.http.maxBodyBytes;
  if (Buffer.byteLength(body, 'utf8') > limit) throw new RequestError(413, 'payload_too_large', `the body is larger than ${limit} bytes`);
  try {
    checkWellFormed(body, { ...DEFAULT_LIMITS, maxBytes: limit });
  } catch (err) {
    if (err instanceof MalformedError) throw new RequestError(400, 'malformed', err.message);
    throw err;
  }
  const checkMs = since(t0);
  if (groupsInbound(ctx)) {
    const msgId = await storeInboundGrouped(ctx, body);
    logIngress(ctx.log, {
      msg_id: msgId,
      check_ms: checkMs,
      mailbox_ms: since(t0) - checkMs,
      wake_ms: 0,
      woken: true,
      total_ms: since(t0),
    });
    return { msgId, woken: true };
  }
  const tMailbox = performance.now();
  const msgId = await ctx.mailbox.insertInbound(body);
  const mailboxMs = since(tMailbox);
  const tWake = performance.now();
  // The row goes through the poller like any other, so it cannot overtake an older mailbox row
  // the poller has not read yet (docs/ordering.md); the NOTIFY wakes the poller at once. If it is
  // lost, the poller finds the row on its next tick.
  // A poller in this process (the twin) starts now. The NOTIFY goes out only when that poller does
  // not hold the poller's lock: while it does, no other process polls, and whoever takes the lock
  // next starts with a poll (one statement and one round trip less per send in the twin).
  const wake = ctx.db.localWake(MAILBOX_CHANNEL, String(msgId));
  wake.now();
  let woken = wake.owned;
  if (!woken)
    try {
      await ctx.db.query(`SELECT pg_notify($1, $2)`, [MAILBOX_CHANNEL, wake.payload]);
      woken = true;
    } catch (err) {
      ctx.log.warn('waking the poller after a mailbox insert failed; it finds the row on its next tick', { msgId, error: String(err) });
    }
  logIngress(ctx.log, { msg_id: msgId, check_ms: checkMs, mailbox_ms: mailboxMs, wake_ms: since(tWake), woken, total_ms: since(t0) });
  return { msgId, woken };
}
