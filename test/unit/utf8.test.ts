import { describe, expect, it } from 'vitest';
import { decodeUtf8Strict, firstInvalidUtf8 } from '../../lib/codec/utf8.ts';

/**
 * The offset msgx names for bytes that are not UTF-8 (a DEAD(MALFORMED) mailbox row), judged by
 * Node's own fatal decoder: the bytes before the offset decode, and no longer prefix that ends a
 * character at the offset's sequence does.
 */
const fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const valid = (b: Uint8Array) => {
  try {
    fatal.decode(b);
    return true;
  } catch {
    return false;
  }
};

describe('UTF-8 validation of mailbox bytes', () => {
  it('agrees with the platform decoder on random and near-UTF-8 byte strings', () => {
    let seed = 42;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const pool = [
      0x41, 0x3c, 0x80, 0xbf, 0xc2, 0xc3, 0xa9, 0xe0, 0xa0, 0xed, 0x9f, 0xa0, 0xef, 0xbf, 0xbd, 0xf0, 0x90, 0xf4, 0x8f, 0xf5, 0xff, 0xc0,
      0xc1,
    ];
    const wrong: string[] = [];
    for (let n = 0; n < 20_000; n++) {
      const b = Uint8Array.from({ length: 1 + Math.floor(rnd() * 8) }, () => pool[Math.floor(rnd() * pool.length)]!);
      const at = firstInvalidUtf8(b);
      const hex = Buffer.from(b).toString('hex');
      if ((at === -1) !== valid(b)) wrong.push(`${hex}: ${at}`);
      else if (at >= 0) {
        if (!valid(b.subarray(0, at))) wrong.push(`${hex}: prefix before ${at} invalid`);
        // Nothing starting at the offset is a whole character (1 to 4 bytes).
        for (let k = 1; k <= 4 && at + k <= b.length; k++)
          if (valid(b.subarray(at, at + k))) wrong.push(`${hex}: ${at}+${k} is a character`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('decodes valid UTF-8 (a BOM kept) and names the first bad bytes and their offset otherwise', () => {
    expect(decodeUtf8Strict(Buffer.from('\uFEFF<MSG>航班 café</MSG>'))).toEqual({ text: '\uFEFF<MSG>航班 café</MSG>' });
    expect(decodeUtf8Strict(Buffer.from([0x3c, 0x4d, 0xe9, 0x3c]))).toEqual({ error: 'not valid UTF-8: bytes 0xE9 0x3C at byte offset 2' });
  });
});
