import type { AppContext } from '../shared/context.ts';

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
  /** The caller is an operator (IAM in the cloud, token or loopback in the twin). */
  isAdmin: boolean;
}

export interface HttpResponse {
  status: number;
  headers?: Record<string, string>;
  /** A string is sent as is (text/plain unless a content-type is set); anything else as JSON. */
  body?: unknown;
}

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** e.g. `/v1/tx-messages/{id}/commit` */
  path: string;
  /** Admin routes answer 401/403 to callers that are not operators. */
  admin?: boolean;
  handle(req: HttpRequest, ctx: AppContext): Promise<HttpResponse>;
}
