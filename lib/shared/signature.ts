import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Every call msgx makes to another service (check-backs, webhooks) is signed with
 * MSGX_SIGNING_SECRET, so the receiver can trust it came from msgx.
 */
export const SIGNATURE_HEADER = 'msgx-signature';

/** `sha256=<hex>` of HMAC-SHA256(secret, text): the body of a webhook, the full URL of a check-back. */
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
