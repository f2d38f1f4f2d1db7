/**
 * Bytes → text for the wire format, which is UTF-8: strictly. A byte sequence that is not UTF-8 is
 * refused with the offset of the first bad byte, never turned into U+FFFD (not
 * well-formed input is refused wherever it enters). A leading BOM is kept, as the ingress keeps it.
 */
const STRICT = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export type Utf8Result = { text: string; error?: undefined } | { text?: undefined; error: string };

export function decodeUtf8Strict(bytes: Uint8Array): Utf8Result {
  try {
    return { text: STRICT.decode(bytes) };
  } catch {
    const at = firstInvalidUtf8(bytes);
    const shown = Array.from(bytes.subarray(at, at + 4), (b) => `0x${b.toString(16).toUpperCase().padStart(2, '0')}`).join(' ');
    return { error: `not valid UTF-8: bytes ${shown} at byte offset ${at}` };
  }
}

/** The offset of the first byte that does not start or continue a well-formed UTF-8 sequence (RFC 3629), or -1. */
export function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    // Lead byte → sequence length and the allowed range of the second byte (no overlongs, no
    // surrogates, nothing above U+10FFFF).
    let n: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
      n = 3;
      if (c === 0xe0) lo = 0xa0;
      if (c === 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4;
      if (c === 0xf0) lo = 0x90;
      if (c === 0xf4) hi = 0x8f;
    } else return i;
    if (i + n > b.length) return i;
    const second = b[i + 1]!;
    if (second < lo || second > hi) return i;
    for (let k = 2; k < n; k++) if ((b[i + k]! & 0xc0) !== 0x80) return i;
    i += n;
  }
  return -1;
}
