import type { DecodedMessage } from '../codec/message.ts';
import type { MsgxError } from '../shared/errors.ts';

/**
 * What decoding a message's text taught this process: the decoded form or the failure. A message
 * that waits behind a failing head, or is itself retried, is read again on every step; decoding a
 * megabyte again each time is what let one bad head stall the pump. Decoding is a pure function of
 * the text and the codec options, so the result is kept per message ID and reused only when the
 * text and the options are exactly those it came from (compared in full, not by a hash).
 *
 * Bounded by entries and by the characters of text held, least recently used out first. Per
 * process: a Lambda's warm container keeps it between invocations, a new one starts empty.
 */
export type Learned = { decoded: DecodedMessage; error?: undefined } | { decoded?: undefined; error: MsgxError };

interface Entry {
  text: string;
  options: string;
  learned: Learned;
}

export const DECODE_CACHE_MAX_ENTRIES = 512;
/** Characters of message text held (about 2 bytes each): 32 copies of a full 1 MiB message. */
export const DECODE_CACHE_MAX_CHARS = 32 * 1024 * 1024;

const entries = new Map<number, Entry>();
let chars = 0;
const counts = { decodes: 0, reuses: 0 };

/** Decodes run and results reused since the process started (a counter, as metrics read it). */
export const decodeCounts = (): Readonly<typeof counts> => ({ ...counts });

/** The result for this message's text under these options: reused when known, else `run()` and kept. */
export function decodeOnce(msgId: number, text: string, options: string, run: () => Learned): Learned {
  const hit = entries.get(msgId);
  if (hit && hit.text === text && hit.options === options) {
    // Most recently used goes last.
    entries.delete(msgId);
    entries.set(msgId, hit);
    counts.reuses++;
    return hit.learned;
  }
  const learned = run();
  keepDecoded(msgId, text, options, learned);
  return learned;
}

/** Whether this message's text under these options is known already (no reuse counted). */
export function knowsDecoded(msgId: number, text: string, options: string): boolean {
  const hit = entries.get(msgId);
  return hit !== undefined && hit.text === text && hit.options === options;
}

/** Keeps what a decode learned (run here, or in a worker thread), as decodeOnce does. */
export function keepDecoded(msgId: number, text: string, options: string, learned: Learned): void {
  const old = entries.get(msgId);
  if (old) forget(msgId, old);
  counts.decodes++;
  // A text larger than the whole budget is not kept (it would evict everything else for itself).
  if (text.length <= DECODE_CACHE_MAX_CHARS / 4) {
    entries.set(msgId, { text, options, learned });
    chars += text.length;
    for (const [id, e] of entries) {
      if (entries.size <= DECODE_CACHE_MAX_ENTRIES && chars <= DECODE_CACHE_MAX_CHARS) break;
      forget(id, e);
    }
  }
}

/** A message reached its end (terminal state): nothing will ask for it again. */
export function forgetDecoded(msgId: number): void {
  const e = entries.get(msgId);
  if (e) forget(msgId, e);
}

function forget(msgId: number, e: Entry): void {
  entries.delete(msgId);
  chars -= e.text.length;
}
