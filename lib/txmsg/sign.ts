import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header on every call msgx makes to a producer, so the producer can trust it came from msgx. */
export const SIGNATURE_HEADER = 'msgx-signature';

/** `sha256=<hex>` of HMAC-SHA256(secret, text); for a check-back `text` is the full URL called. */
export function sign(secret: string, text: string): string {
  return `sha256=${createHmac('sha256', secret).update(text).digest('hex')}`;
}

/** For receivers (the example producer uses it): constant-time comparison. */
export function verify(secret: string, text: string, signature: string | undefined): boolean {
  if (!signature) return false;
  const expected = Buffer.from(sign(secret, text));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
