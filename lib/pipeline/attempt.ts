import { decode } from '../codec/decode.ts';
import type { DecodedMessage } from '../codec/message.ts';
import type { MailboxText } from '../mailbox/mailbox.ts';
import { asMsgxError, MalformedError, type MsgxError } from '../shared/errors.ts';
import { decodeOnce } from './decodeCache.ts';

/**
 * What the pump knows about a message before its transaction: its raw text (from our copy or the
 * mailbox) and the result of decoding it. Decoding is CPU work and happens outside the transaction.
 */
export type Prepared =
  | { msgId: number; rawText: string; decoded: DecodedMessage; error?: undefined }
  | { msgId: number; rawText: string | null; decoded?: undefined; error: MsgxError };

/** What a decode depends on besides the text (the decode-once cache's key with the message ID). */
export const decodeOptionsKey = (timezone: string, maxBytes: number, dayBoundary: boolean) => `${timezone}|${maxBytes}|${dayBoundary}`;

export function prepare(
  msgId: number,
  rawText: MailboxText | undefined | null,
  timezone: string,
  maxBytes: number,
  dayBoundary = false,
): Prepared {
  if (rawText === undefined || rawText === null)
    return { msgId, rawText: null, error: new MalformedError('raw text missing: the mailbox row has no MSG_TEXT') };
  // Bytes that are not UTF-8 are not text: refused (MALFORMED is never replayed). The copy kept
  // for trace shows U+FFFD in place of the bad bytes, as it does for U+0000.
  if (typeof rawText !== 'string')
    return { msgId, rawText: rawText.lossy.replaceAll('\u0000', '\uFFFD'), error: new MalformedError(rawText.undecodable) };
  // Decoded once per process: a retry, or a message read again behind a failing head, reuses what
  // the first decode learned, the failure included.
  const learned = decodeOnce(msgId, rawText, decodeOptionsKey(timezone, maxBytes, dayBoundary), () => {
    try {
      return { decoded: decode(rawText, { timezone, limits: { maxBytes }, dayBoundary }) };
    } catch (err) {
      return { error: asMsgxError(err, 'decode') };
    }
  });
  if (learned.decoded) return { msgId, rawText, decoded: learned.decoded };
  // The codec refuses U+0000 (not XML); PostgreSQL text cannot hold it either, so the copy we
  // keep for trace and replay shows it as U+FFFD.
  return { msgId, rawText: rawText.replaceAll('\u0000', '\uFFFD'), error: learned.error };
}
