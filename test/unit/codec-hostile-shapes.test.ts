import { expect, it } from 'vitest';
import { checkWellFormed, decode } from '../../lib/codec/decode.ts';
import { MsgxError } from '../../lib/shared/errors.ts';
import { loadCorpus } from '../fixtures/hostile/corpus.ts';

/**
 * The worst shape for each input check, at the size limit (test/fixtures/hostile, "worst-*"): each
 * is decided — accepted, or refused as MALFORMED with its reason — by the ingress check and by the
 * pump's decoder alike. How long each takes is the bench's business (`npm run bench -- --only
 * decoder` reports the slowest one's cost per KiB), never asserted here. Seen failing with the scan
 * reading CDATA as markup (the comment bomb inside CDATA is then refused).
 */
const worst = loadCorpus().filter((c) => c.name.includes('-worst-'));

it('the corpus holds the worst shapes near 1 MiB', () => {
  expect(worst.length).toBeGreaterThanOrEqual(20);
  for (const c of worst) expect(Buffer.byteLength(c.text), c.name).toBeGreaterThan(1024 * 1024 - 4096);
  expect(worst.some((c) => c.name.endsWith('comment-bomb-in-cdata'))).toBe(true);
});

it.each(worst.map((c) => [c.name, c] as const))('%s is decided as the corpus says', (_, c) => {
  const refused = c.expect.http !== undefined;
  let ingress: unknown;
  try {
    checkWellFormed(c.text);
  } catch (err) {
    ingress = err;
  }
  let pump: unknown;
  try {
    decode(c.text, { timezone: 'Asia/Shanghai' });
  } catch (err) {
    pump = err;
  }
  if (refused) {
    for (const err of [ingress, pump]) {
      expect(err).toBeInstanceOf(MsgxError);
      expect((err as MsgxError).errorClass).toBe('MALFORMED');
      if (c.expect.reason) expect((err as Error).message).toContain(c.expect.reason);
    }
  } else {
    expect(ingress).toBeUndefined();
    expect(pump).toBeUndefined();
  }
});
