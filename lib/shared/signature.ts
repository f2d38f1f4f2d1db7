import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Every call msgx makes to another service (check-backs, webhooks) is signed with
 * MSGX_SIGNING_SECRET (docs/txmsg.md "Verifying msgx's signature"), so the receiver can trust it came from msgx and refuse a
 * replay: `msgx-signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<text>")>`, the text
 * being a webhook's body or a check-back's full URL. The msgx headers' values are inside that
 * text (a webhook body holds `eventId` and `type`, a check-back URL its `id`), so they are signed
 * too; receivers take them from the signed text. Verification: docs/txmsg.md, docs/outbox.md.
 */
export const SIGNATURE_HEADER = 'msgx-signature';

/** How old (or how far ahead, for clock skew) a signature may be before it is refused. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

const hmac = (secret: string, t: number, text: string) => createHmac('sha256', secret).update(`${t}.${text}`).digest('hex');

/**
 * The header value for `text` signed at `nowMs`. The time is the wall clock of the call (the
 * receiver compares it with its own), not a scheduling clock.
 */
export function sign(secret: string, text: string, nowMs: number = Date.now()): string {
  const t = Math.floor(nowMs / 1000);
  return `t=${t},v1=${hmac(secret, t, text)}`;
}

export type Verification = { ok: true; t: number } | { ok: false; reason: 'missing' | 'malformed' | 'too_old' | 'in_future' | 'mismatch' };

/**
 * For receivers: checks `header` against `text` in constant time and refuses a signature outside
 * ±toleranceSeconds of `nowMs` (a captured request cannot be replayed later). Several `v1=` may
 * be given (a receiver rotating secrets may accept any).
 */
export function verifySignature(
  secret: string,
  text: string,
  header: string | undefined,
  o: { nowMs?: number; toleranceSeconds?: number } = {},
): Verification {
  if (!header) return { ok: false, reason: 'missing' };
  let t: number | undefined;
  const given: string[] = [];
  for (const part of header.split(',')) {
    const [k, v] = part.trim().split('=', 2);
    if (k === 't' && v && /^\d{1,12}$/.test(v)) t = Number(v);
    else if (k === 'v1' && v && /^[0-9a-f]{64}$/.test(v)) given.push(v);
  }
  if (t === undefined || given.length === 0) return { ok: false, reason: 'malformed' };
  const age = Math.floor((o.nowMs ?? Date.now()) / 1000) - t;
  const tolerance = o.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (age > tolerance) return { ok: false, reason: 'too_old' };
  if (age < -tolerance) return { ok: false, reason: 'in_future' };
  const want = Buffer.from(hmac(secret, t, text), 'hex');
  return given.some((g) => timingSafeEqual(Buffer.from(g, 'hex'), want)) ? { ok: true, t } : { ok: false, reason: 'mismatch' };
}

/** verifySignature as a yes/no, for receivers that need no reason. */
export function verify(
  secret: string,
  text: string,
  header: string | undefined,
  o: { nowMs?: number; toleranceSeconds?: number } = {},
): boolean {
  return verifySignature(secret, text, header, o).ok;
}
