import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { RequestError } from '../shared/errors.ts';
import { type HttpRequest, type HttpResponse, serializeBody } from './types.ts';

/**
 * API Gateway (REST, payload 1.0) event → HttpRequest, and back. Admin routes are IAM-only at the
 * gateway; a request that reached us with an IAM caller on an /admin path is an operator, and
 * that principal is the audit actor. Headers that could claim an identity are dropped: in the
 * cloud only IAM says who the caller is.
 */
const IDENTITY_HEADERS = new Set(['x-msgx-actor', 'x-amzn-principal']);

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Invalid UTF-8 is refused (400), not silently turned into U+FFFD. */
function decodeUtf8(bytes: Buffer): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new RequestError(400, 'malformed', 'the body is not valid UTF-8');
  }
}

export function fromApiGateway(event: APIGatewayProxyEvent): HttpRequest {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.headers ?? {}))
    if (v !== undefined && !IDENTITY_HEADERS.has(k.toLowerCase())) headers[k.toLowerCase()] = v;
  const body = event.body ? (event.isBase64Encoded ? decodeUtf8(Buffer.from(event.body, 'base64')) : event.body) : '';
  const identity = event.requestContext?.identity;
  const caller = identity?.userArn ?? identity?.caller ?? undefined;
  return {
    method: event.httpMethod.toUpperCase(),
    path: event.path,
    headers,
    query: Object.fromEntries(Object.entries(event.queryStringParameters ?? {}).filter((e): e is [string, string] => e[1] !== undefined)),
    body,
    params: {},
    isAdmin: Boolean(caller),
    principal: caller,
  };
}

export function toApiGateway(r: HttpResponse): APIGatewayProxyResult {
  const { headers, body } = serializeBody(r);
  return { statusCode: r.status, headers, body };
}
