import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { TxValidationError } from '../../lib/txmsg/errors.ts';
import { requestHash } from '../../lib/txmsg/idempotency.ts';
import { checkUrlFor } from '../../lib/txmsg/checkCall.ts';
import { sign, verify, verifySignature } from '../../lib/shared/signature.ts';
import { parsePrepare } from '../../lib/txmsg/validate.ts';

const ALLOWED = ['http://orders.local:7001', 'https://shop.example'];
const base = { topic: 'points', payload: { a: 1 }, checkUrl: 'http://orders.local:7001/tx-check' };

function rejection(body: unknown, allowed = ALLOWED): TxValidationError {
  try {
    parsePrepare(body, allowed);
  } catch (err) {
    expect(err).toBeInstanceOf(TxValidationError);
    return err as TxValidationError;
  }
  throw new Error('expected a rejection');
}

describe('prepare validation', () => {
  it('applies the contract defaults', () => {
    const p = parsePrepare(base, ALLOWED);
    expect(p.checkAfterMs).toBe(60_000);
    expect(p.checkTimeoutMs).toBe(5_000);
    expect(p.key).toBeUndefined();
  });

  it.each([
    [{ ...base, topic: '' }, 'topic'],
    [{ ...base, topic: 'a b' }, 'topic'],
    [{ ...base, topic: undefined }, 'topic'],
    [{ ...base, payload: undefined }, 'payload'],
    [{ ...base, payload: null }, 'payload'],
    [{ ...base, key: 42 }, 'key'],
    [{ ...base, headers: { a: 1 } }, 'headers.a'],
    [{ ...base, headers: { 'msgx-txmsg-id': 'forged' } }, 'headers.msgx-txmsg-id'],
    [{ ...base, checkUrl: undefined }, 'checkUrl'],
    [{ ...base, checkUrl: 'not a url' }, 'checkUrl'],
    [{ ...base, checkUrl: 'ftp://orders.local:7001/x' }, 'checkUrl'],
    [{ ...base, checkUrl: 'http://user:pw@orders.local:7001/x' }, 'checkUrl'],
    [{ ...base, checkUrl: 'http://orders.local:7002/tx-check' }, 'checkUrl'],
    [{ ...base, checkUrl: 'http://evil.local/?x=http://orders.local:7001' }, 'checkUrl'],
    [{ ...base, checkAfterMs: -1 }, 'checkAfterMs'],
    [{ ...base, checkAfterMs: 1.5 }, 'checkAfterMs'],
    [{ ...base, checkTimeoutMs: 10 }, 'checkTimeoutMs'],
    [{ ...base, checkTimeoutMs: '5000' }, 'checkTimeoutMs'],
    [{ ...base, checkUrl2: 'x' }, 'checkUrl2'],
    ['just a string', 'body'],
  ])('rejects %j naming %s', (body, field) => {
    const err = rejection(body);
    expect(err.status).toBe(400);
    expect(err.extra.field).toBe(field);
    expect(err.detail.startsWith(`${field}:`)).toBe(true);
  });

  it('refuses every prepare while MSGX_TX_CHECK_ALLOWED_ORIGINS is unset, and says so', () => {
    const err = rejection(base, []);
    expect(err.extra.field).toBe('checkUrl');
    expect(err.detail).toMatch(/MSGX_TX_CHECK_ALLOWED_ORIGINS is not set/);
  });

  it('matches origins exactly (scheme, host and port), normalising default ports', () => {
    expect(() => parsePrepare({ ...base, checkUrl: 'https://shop.example:443/check' }, ALLOWED)).not.toThrow();
    expect(rejection({ ...base, checkUrl: 'http://shop.example/check' }).extra.field).toBe('checkUrl');
    expect(rejection({ ...base, checkUrl: 'https://shop.example.evil.com/check' }).extra.field).toBe('checkUrl');
  });
});

describe('check-back URL and signature', () => {
  it('sets id on the check URL, keeping the producer query', () => {
    expect(checkUrlFor({ id: 'abc', check_url: 'http://h:1/c?tenant=7' })).toBe('http://h:1/c?tenant=7&id=abc');
    expect(checkUrlFor({ id: 'a b', check_url: 'http://h:1/c' })).toBe('http://h:1/c?id=a+b');
  });

  it('refuses a fragment in the check URL at prepare, naming it', () => {
    for (const checkUrl of ['https://shop.example/check#x', 'https://shop.example/check?a=1#', 'https://shop.example/check#'])
      expect(rejection({ ...base, checkUrl }).detail).toMatch(/^checkUrl: must not contain a fragment \(#…\)/);
  });
});

describe('signatures (fake clock: every time is given)', () => {
  const URL_TEXT = 'http://h:1/c?id=1';
  const T0 = Date.UTC(2026, 10, 30, 12, 0, 0); // a fixed instant; nothing reads the real clock

  it('is t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<text>">', () => {
    const h = sign('secret', URL_TEXT, T0 + 999);
    const t = T0 / 1000;
    expect(h).toBe(`t=${t},v1=${createHmac('sha256', 'secret').update(`${t}.${URL_TEXT}`).digest('hex')}`);
  });

  it('verifies a valid signature within the window, either side (clock skew)', () => {
    const h = sign('secret', URL_TEXT, T0);
    expect(verifySignature('secret', URL_TEXT, h, { nowMs: T0 })).toEqual({ ok: true, t: T0 / 1000 });
    expect(verify('secret', URL_TEXT, h, { nowMs: T0 + 300_000 })).toBe(true);
    expect(verify('secret', URL_TEXT, h, { nowMs: T0 - 300_000 })).toBe(true);
    // a receiver rotating secrets may be sent several v1 values; any one matching is enough
    const other = sign('old', URL_TEXT, T0).split(',')[1];
    expect(verify('secret', URL_TEXT, `${h},${other}`, { nowMs: T0 })).toBe(true);
  });

  it('refuses a tampered text, timestamp or secret', () => {
    const h = sign('secret', URL_TEXT, T0);
    const now = { nowMs: T0 };
    expect(verifySignature('secret', 'http://h:1/c?id=2', h, now)).toEqual({ ok: false, reason: 'mismatch' });
    expect(verifySignature('other', URL_TEXT, h, now)).toEqual({ ok: false, reason: 'mismatch' });
    // moving t (to make an old capture look fresh) breaks the HMAC
    const moved = h.replace(/^t=(\d+)/, (_, t: string) => `t=${Number(t) + 60}`);
    expect(verifySignature('secret', URL_TEXT, moved, { nowMs: T0 + 60_000 })).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('refuses a replay older than the window, and one from too far ahead', () => {
    const h = sign('secret', URL_TEXT, T0);
    expect(verifySignature('secret', URL_TEXT, h, { nowMs: T0 + 301_000 })).toEqual({ ok: false, reason: 'too_old' });
    expect(verifySignature('secret', URL_TEXT, h, { nowMs: T0 + 60_000, toleranceSeconds: 30 })).toEqual({ ok: false, reason: 'too_old' });
    expect(verifySignature('secret', URL_TEXT, h, { nowMs: T0 - 301_000 })).toEqual({ ok: false, reason: 'in_future' });
  });

  it('refuses a missing or malformed header', () => {
    const now = { nowMs: T0 };
    expect(verifySignature('secret', URL_TEXT, undefined, now)).toEqual({ ok: false, reason: 'missing' });
    for (const h of ['sha256=' + '0'.repeat(64), 't=abc,v1=' + '0'.repeat(64), `t=${T0 / 1000}`, `t=${T0 / 1000},v1=xyz`])
      expect(verifySignature('secret', URL_TEXT, h, now)).toEqual({ ok: false, reason: 'malformed' });
  });
});

describe('idempotency request hash', () => {
  it('ignores key order but not values', () => {
    expect(requestHash({ a: 1, b: { c: 2, d: 3 } })).toBe(requestHash({ b: { d: 3, c: 2 }, a: 1 }));
    expect(requestHash({ a: 1 })).not.toBe(requestHash({ a: 2 }));
    expect(requestHash({ a: [1, 2] })).not.toBe(requestHash({ a: [2, 1] }));
  });
});
