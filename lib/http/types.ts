import type { AppContext } from '../app/context.ts';

/** A transport-neutral request: built from an API Gateway event or from a twin HTTP request. */
export interface HttpRequest {
  method: string;
  path: string;
  /** Header names in lower case. */
  headers: Record<string, string>;
  query: Record<string, string>;
  body: string;
  /** Filled by the router from `{name}` segments. */
  params: Record<string, string>;
  /** The caller is an operator (a listed IAM role in the cloud, token or loopback in the twin). */
  isAdmin: boolean;
  /** Why the caller is not an operator, for the 403 of an admin route (cloud only). */
  notAdminBecause?: string;
  /** The operator's IAM role (and session) in the cloud; the audit actor when present. */
  principal?: string;
}

export interface HttpResponse {
  status: number;
  headers?: Record<string, string>;
  /** A string is sent as is (text/plain unless a content-type is set); anything else as JSON. */
  body?: unknown;
  /** Set-Cookie values (the twin's console sign-in only; lib/http/consoleSession.ts). */
  cookies?: string[];
}

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** e.g. `/v1/tx-messages/{id}/commit` */
  path: string;
  /** Admin routes answer 401/403 to callers that are not operators. */
  admin?: boolean;
  /**
   * Media types a body may have (without parameters). Unset: a JSON route, whose body must be
   * declared `application/json`.
   */
  accepts?: readonly string[];
  handle(req: HttpRequest, ctx: AppContext): Promise<HttpResponse>;
}

/** The wire form of a response body: a string as is (text/plain unless set), anything else as JSON. */
export function serializeBody(r: HttpResponse): { headers: Record<string, string>; body: string } {
  // No response is to be content-sniffed: a JSON error echoing input must never run as HTML.
  const headers: Record<string, string> = { 'x-content-type-options': 'nosniff', ...r.headers };
  if (typeof r.body === 'string') {
    headers['content-type'] ??= 'text/plain; charset=utf-8';
    return { headers, body: r.body };
  }
  if (r.body === undefined) return { headers, body: '' };
  headers['content-type'] ??= 'application/json';
  return { headers, body: JSON.stringify(r.body) };
}
