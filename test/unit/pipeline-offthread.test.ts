import { expect, it } from 'vitest';
import { decode } from '../../lib/codec/decode.ts';
import { decodeOffThread, OFF_THREAD_CHARS } from '../../lib/pipeline/offThread.ts';

const meta = '<META><SNDR>T</SNDR><RCVR>MSGX</RCVR><SEQN>1</SEQN><DTTM>20261129090000</DTTM><TYPE>FLOP</TYPE><STYP>UPDT</STYP></META>';
const flop = (remark: string) => `<MSG>${meta}<FLOP><FLIGHT><FLID>1</FLID><XREM a="x &amp; y">${remark}</XREM></FLIGHT></FLOP></MSG>`;
const ask = (text: string) => ({ text, timezone: 'UTC', maxBytes: 1024 * 1024, dayBoundary: false });

it('a large text decoded on the worker thread is what decoding it in place gives', async () => {
  const text = flop(`A &amp; B &#x4E2D; ${'r'.repeat(OFF_THREAD_CHARS)}`);
  const learned = await decodeOffThread(ask(text));
  expect(learned?.decoded).toEqual(decode(text, { timezone: 'UTC' }));
}, 60_000);

it('a malformed text comes back as MALFORMED with the in-place reason', async () => {
  const text = flop(`&x; ${'r'.repeat(OFF_THREAD_CHARS)}`);
  const learned = await decodeOffThread(ask(text));
  let reason = '';
  try {
    decode(text, { timezone: 'UTC' });
  } catch (err) {
    reason = (err as Error).message;
  }
  expect(learned?.error?.errorClass).toBe('MALFORMED');
  expect(learned?.error?.message).toBe(reason);
}, 60_000);
