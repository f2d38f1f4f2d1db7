import { decode } from '../codec/decode.ts';
import type { DecodedMessage } from '../codec/message.ts';
import { asMsgxError, MalformedError, type MsgxError } from '../shared/errors.ts';

/**
 * What the pump knows about a message before its transaction: its raw text (from our copy or the
 * mailbox) and the result of decoding it. Decoding is CPU work and happens outside the transaction.
 */
export type Prepared =
  | { msgId: number; rawText: string; decoded: DecodedMessage; error?: undefined }
  | { msgId: number; rawText: string | null; decoded?: undefined; error: MsgxError };

export const NUL_REASON = 'the character U+0000 is not allowed in XML';

export function prepare(msgId: number, rawText: string | undefined | null, timezone: string, maxBytes: number): Prepared {
  if (rawText === undefined || rawText === null)
    return { msgId, rawText: null, error: new MalformedError('raw text missing: the mailbox row has no MSG_TEXT') };
  // U+0000 is not XML, and PostgreSQL text cannot hold it: refuse it here, alone, with a copy that
  // PostgreSQL can store. Otherwise the group's transaction fails and its innocent head is charged.
  if (rawText.includes('\u0000'))
    return { msgId, rawText: rawText.replaceAll('\u0000', '\uFFFD'), error: new MalformedError(NUL_REASON) };
  try {
    return { msgId, rawText, decoded: decode(rawText, { timezone, limits: { maxBytes } }) };
  } catch (err) {
    return { msgId, rawText, error: asMsgxError(err) };
  }
}
