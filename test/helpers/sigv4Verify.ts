import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * SigV4 checked the way API Gateway checks it for an AWS_IAM route, by hand (node:crypto) and not
 * with the signer the CLI uses, so a mistake in one is not repeated in the other: the canonical
 * request is rebuilt from what arrived (method, path, query, the signed headers, the hash of the
 * bytes received), the key derived from the caller's secret, the scope and clock checked.
 */
export interface AccessKey {
  accessKeyId: string;
  secretAccessKey: string;
  /** Temporary credentials carry a session token, which must then be sent and signed. */
  sessionToken?: string;
  /** The caller API Gateway names for this key (an assumed-role session ARN). */
  principal: string;
}

export interface ArrivedRequest {
  method: string;
  /** The request target as it arrived (path and query, still percent-encoded). */
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export type Verified = { ok: true; key: AccessKey } | { ok: false; reason: string };

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
const rfc3986 = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const AUTH =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/;
/** API Gateway refuses a request signed more than 15 minutes away from its clock. */
const SKEW_MS = 15 * 60_000;

/** Whether `req` is a request signed with SigV4 at all (an Authorization header of that scheme). */
export function isSigned(req: Pick<ArrivedRequest, 'headers'>): boolean {
  return header(req.headers, 'authorization').startsWith('AWS4-HMAC-SHA256 ');
}

/** The key whose signature `req` carries, or the reason it does not verify. */
export function verifySigV4(
  req: ArrivedRequest,
  keys: readonly AccessKey[],
  o: { region: string; service?: string; now?: number },
): Verified {
  const service = o.service ?? 'execute-api';
  const auth = AUTH.exec(header(req.headers, 'authorization'));
  if (!auth) return { ok: false, reason: 'no SigV4 Authorization header' };
  const [, keyId, day, region, scopeService, signedHeaders, signature] = auth as unknown as string[];
  const key = keys.find((k) => k.accessKeyId === keyId);
  if (!key) return { ok: false, reason: `the security token included in the request is invalid (unknown access key ${keyId})` };
  if (region !== o.region || scopeService !== service) return { ok: false, reason: `wrong scope ${keyId}/${region}/${scopeService}` };
  const amzDate = header(req.headers, 'x-amz-date');
  if (!amzDate.startsWith(day!)) return { ok: false, reason: 'x-amz-date is not the credential day' };
  const at = Date.parse(amzDate.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'));
  if (!Number.isFinite(at) || Math.abs(at - (o.now ?? Date.now())) > SKEW_MS) return { ok: false, reason: 'signature expired' };
  const names = signedHeaders!.split(';');
  if (!names.includes('host') || !names.includes('x-amz-date')) return { ok: false, reason: 'host and x-amz-date must be signed' };
  if (
    key.sessionToken !== undefined &&
    (header(req.headers, 'x-amz-security-token') !== key.sessionToken || !names.includes('x-amz-security-token'))
  )
    return { ok: false, reason: 'the session token is not signed' };
  const url = new URL(req.url, 'http://x');
  const query = [...url.searchParams]
    .map(([k, v]) => `${rfc3986(k)}=${rfc3986(v)}`)
    .sort()
    .join('&');
  // Services other than S3 sign each path segment encoded once more than it travels.
  const path = url.pathname
    .split('/')
    .map((s) => rfc3986(s))
    .join('/');
  const headers = names.map((n) => `${n}:${header(req.headers, n).trim().replace(/\s+/g, ' ')}\n`).join('');
  // The payload hash of the bytes that arrived, not the one the client claims.
  const canonical = [req.method, path, query, headers, signedHeaders, sha256(req.body)].join('\n');
  const toSign = ['AWS4-HMAC-SHA256', amzDate, `${day}/${region}/${service}/aws4_request`, sha256(canonical)].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${key.secretAccessKey}`, day!), region), service), 'aws4_request');
  const expected = createHmac('sha256', signingKey).update(toSign).digest();
  return timingSafeEqual(expected, Buffer.from(signature!, 'hex'))
    ? { ok: true, key }
    : { ok: false, reason: 'the signature does not match' };
}

function header(headers: ArrivedRequest['headers'], name: string): string {
  const v = headers[name];
  return Array.isArray(v) ? v.join(',') : (v ?? '');
}
