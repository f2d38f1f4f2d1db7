import { z } from 'zod';
import { lazy } from '../shared/lazy.ts';
import { TxValidationError } from './errors.ts';

const WEEK_MS = 7 * 24 * 3_600_000;

/**
 * The body of `POST /v1/tx-messages` (docs/txmsg.md "API"). Unknown fields are refused so typos
 * surface. Built on the first prepare, not at cold start (most ingress requests are not prepares).
 */
const prepareSchema = lazy(() =>
  z
    .object({
      topic: z
        .string()
        .min(1)
        .max(249)
        .regex(/^[A-Za-z0-9._-]+$/, 'must be a Kafka topic name (letters, digits, ".", "_", "-")'),
      key: z.string().max(1024).nullable().optional(),
      // Sent as JSON text; a string as is. null would be a Kafka tombstone, which is not a message.
      payload: z.unknown().refine((v) => v !== undefined && v !== null, 'is required and must not be null'),
      headers: z
        .record(
          z
            .string()
            .min(1)
            .max(256)
            .refine((h) => !h.toLowerCase().startsWith('msgx-'), 'header names starting with msgx- are reserved'),
          z.string().max(8192),
        )
        .optional(),
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
  const r = prepareSchema().safeParse(body);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const field =
      issue.code === 'unrecognized_keys' ? (issue as { keys: string[] }).keys.join(', ') : issue.path.map(String).join('.') || 'body';
    throw new TxValidationError(field, issue.code === 'unrecognized_keys' ? 'unknown field' : issue.message);
  }
  checkCheckUrl(r.data.checkUrl, allowedOrigins);
  return r.data;
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
