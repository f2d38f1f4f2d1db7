import { z } from 'zod';
import { fieldPath } from '../http/jsonBody.ts';
import { topicNameProblem } from '../shared/topicName.ts';
import { lazy } from '../shared/lazy.ts';
import { TxValidationError } from './errors.ts';

const WEEK_MS = 7 * 24 * 3_600_000;

/**
 * Names that are properties of every JavaScript object: a record keyed by `__proto__` loses it
 * (zod's record did, silently), and code that looks headers up by name would find inherited
 * members. Refused, not dropped.
 */
const RESERVED_NAMES = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * The body of `POST /v1/tx-messages` (docs/txmsg.md "API"). Unknown fields are refused so typos
 * surface. Built on the first prepare, not at cold start (most ingress requests are not prepares).
 */
const prepareSchema = lazy(() =>
  z
    .object({
      topic: z.string().superRefine((t, c) => {
        const problem = topicNameProblem(t);
        if (problem) c.addIssue({ code: 'custom', message: problem });
      }),
      key: z.string().max(1024).nullable().optional(),
      // Sent as JSON text; a string as is. null would be a Kafka tombstone, which is not a message.
      payload: z.unknown().refine((v) => v !== undefined && v !== null, 'is required and must not be null'),
      // Names are checked first by checkHeaderNames: zod's record silently skips `__proto__`.
      headers: z.record(z.string(), z.string().max(8192)).optional(),
      checkUrl: z.string().max(2048),
      // The first check-back must come after the producer's local transaction: never at once.
      checkAfterMs: z.number().int().min(1, 'must be at least 1 ms (longer than the local transaction)').max(WEEK_MS).default(60_000),
      checkTimeoutMs: z.number().int().min(100).max(60_000).default(5_000),
      // rtm's message-table fields (docs/txmsg.md "API"): the business the message belongs to (msg_name) and who created it
      // (create_msg_uid), both as the producer names them, for operators looking at a message.
      bizName: z.string().trim().min(1).max(70).optional(),
      createdBy: z.string().trim().min(1).max(70).optional(),
    })
    .strict(),
);

export type PrepareBody = z.infer<ReturnType<typeof prepareSchema>>;

/** Parses and validates; every rejection names the field. */
export function parsePrepare(body: unknown, allowedOrigins: string[]): PrepareBody {
  checkHeaderNames(body);
  const r = prepareSchema().safeParse(body);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const field =
      issue.code === 'unrecognized_keys'
        ? (issue as { keys: string[] }).keys.join(', ')
        : fieldPath(issue.path.map((p) => (typeof p === 'number' ? p : String(p))));
    throw new TxValidationError(field, issue.code === 'unrecognized_keys' ? 'unknown field' : issue.message);
  }
  checkCheckUrl(r.data.checkUrl, allowedOrigins);
  return r.data;
}

/** Every name in `headers`, as the producer sent it (own keys, `__proto__` included). */
function checkHeaderNames(body: unknown): void {
  const headers = (body as { headers?: unknown } | null)?.headers;
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) return; // the schema says why
  for (const name of Object.keys(headers)) {
    const field = fieldPath(['headers', name]);
    if (name.length === 0 || name.length > 256) throw new TxValidationError(field, 'a header name must be 1 to 256 characters');
    if (name.toLowerCase().startsWith('msgx-'))
      throw new TxValidationError(field, 'header names starting with msgx- are reserved: msgx sets them on every record it sends');
    if (RESERVED_NAMES.has(name.toLowerCase()))
      throw new TxValidationError(
        field,
        `${name} is a reserved name (__proto__, constructor and prototype are not accepted as header names)`,
      );
  }
}

/**
 * msgx calls checkUrl on its own, so its origin must be on the operator's list: otherwise any
 * producer could make msgx probe internal addresses (SSRF). Unset list = nothing is allowed.
 */
export function checkCheckUrl(checkUrl: string, allowedOrigins: string[]): URL {
  if (allowedOrigins.length === 0)
    throw new TxValidationError(
      'checkUrl',
      'MSGX_TX_CHECK_ALLOWED_ORIGINS is not set, so msgx refuses every prepare (it may call no check-back URL)',
    );
  let url: URL;
  try {
    url = new URL(checkUrl);
  } catch {
    throw new TxValidationError('checkUrl', 'must be an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TxValidationError('checkUrl', 'must be an http or https URL');
  if (url.username || url.password) throw new TxValidationError('checkUrl', 'must not carry credentials');
  // A fragment is never sent, so the URL msgx signs would differ from the one the producer sees.
  if (checkUrl.includes('#'))
    throw new TxValidationError(
      'checkUrl',
      'must not contain a fragment (#…): it is never sent, so the producer could not verify the signed URL',
    );
  if (!allowedOrigins.some((o) => normaliseOrigin(o) === url.origin))
    throw new TxValidationError('checkUrl', `origin ${url.origin} is not listed in MSGX_TX_CHECK_ALLOWED_ORIGINS`);
  return url;
}

/** `https://Host:443/` and `https://host` are the same origin; anything unparsable matches nothing. */
function normaliseOrigin(o: string): string | undefined {
  try {
    return new URL(o).origin;
  } catch {
    return undefined;
  }
}
