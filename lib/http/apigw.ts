import type { APIGatewayProxyEvent, APIGatewayProxyEventV2WithIAMAuthorizer, APIGatewayProxyResult } from 'aws-lambda';
import { RequestError } from '../shared/errors.ts';
import { checkOperator } from './operators.ts';
import { type HttpRequest, type HttpResponse, serializeBody } from './types.ts';

/**
 * API Gateway event → HttpRequest, and back. The HTTP API may send payload format 1.0 (`httpMethod`,
 * `path`, `requestContext.identity.userArn`) or 2.0 (`requestContext.http.method`, `rawPath`,
 * `requestContext.authorizer.iam.userArn`); both are read. Admin routes are IAM-only at the
 * gateway, and the IAM caller is an operator only when its role is listed in `operators`
 * (MSGX_OPERATOR_PRINCIPALS, lib/http/operators.ts); that role is the audit actor. Headers that
 * could claim an identity are dropped: in the cloud only IAM says who the caller is.
 */
export type ApiGatewayEvent = APIGatewayProxyEvent | APIGatewayProxyEventV2WithIAMAuthorizer;

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

const isV2 = (e: ApiGatewayEvent): e is APIGatewayProxyEventV2WithIAMAuthorizer => (e as { version?: string }).version === '2.0';

export function fromApiGateway(event: ApiGatewayEvent, operators: readonly string[] = []): HttpRequest {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.headers ?? {}))
    if (v !== undefined && !IDENTITY_HEADERS.has(k.toLowerCase())) headers[k.toLowerCase()] = v;
  // Payload 2.0 moves cookies out of the headers; the router reads them as the header.
  if (isV2(event) && event.cookies?.length) headers.cookie = event.cookies.join('; ');
  const body = event.body ? (event.isBase64Encoded ? decodeUtf8(Buffer.from(event.body, 'base64')) : event.body) : '';
  const caller = isV2(event) ? event.requestContext?.authorizer?.iam?.userArn : event.requestContext?.identity?.userArn;
  const operator = checkOperator(caller ?? undefined, operators);
  return {
    method: (isV2(event) ? event.requestContext.http.method : event.httpMethod).toUpperCase(),
    path: isV2(event) ? event.rawPath : event.path,
    headers,
    query: Object.fromEntries(Object.entries(event.queryStringParameters ?? {}).filter((e): e is [string, string] => e[1] !== undefined)),
    body,
    params: {},
    isAdmin: operator.ok,
    ...(operator.ok ? { principal: operator.actor } : { notAdminBecause: operator.reason }),
  };
}

export function toApiGateway(r: HttpResponse): APIGatewayProxyResult {
  const { headers, body } = serializeBody(r);
  return { statusCode: r.status, headers, body };
}
