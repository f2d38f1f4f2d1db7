import { isOutage, MsgxError, RequestError } from '../shared/errors.ts';
import type { AppContext } from '../app/context.ts';
import { isJsonType, mediaType } from './jsonBody.ts';
import type { HttpRequest, HttpResponse, Route } from './types.ts';

export { parseJsonBody, parseJsonObject } from './jsonBody.ts';

interface Compiled {
  route: Route;
  regex: RegExp;
  names: string[];
}

const BODY_METHODS = new Set(['POST', 'PUT', 'DELETE', 'PATCH']);

/**
 * Matches a request to a route and turns every thrown error into `{error, detail}` JSON. Input
 * that cannot be a valid request (bad percent-encoding, NUL characters, a body type the route
 * does not take) is refused here, once, before any route sees it.
 */
export class Router {
  readonly #routes: Compiled[] = [];

  constructor(routes: Route[] = []) {
    for (const r of routes) this.add(r);
  }

  add(route: Route): this {
    const names: string[] = [];
    const pattern = route.path.replace(/\{(\w+)\}/g, (_, n: string) => (names.push(n), '([^/]+)'));
    this.#routes.push({ route, regex: new RegExp(`^${pattern}/?$`), names });
    return this;
  }

  async handle(req: HttpRequest, ctx: AppContext): Promise<HttpResponse> {
    try {
      const found = this.#match(req);
      if (!found) throw new RequestError(404, 'not_found', `no route for ${req.method} ${safeText(req.path)}`);
      const { route, params } = found;
      if (route.admin && !req.isAdmin)
        throw new RequestError(403, 'forbidden', req.notAdminBecause ?? 'admin route: operator credentials required');
      checkInput(req, route);
      return await route.handle({ ...req, params }, ctx);
    } catch (err) {
      if (!(err instanceof RequestError) && !(err instanceof MsgxError))
        ctx.log.error('request failed', { method: req.method, path: safeText(req.path), error: err as Error });
      return errorResponse(err);
    }
  }

  #match(req: HttpRequest): { route: Route; params: Record<string, string> } | undefined {
    let pathMatched = false;
    for (const c of this.#routes) {
      const m = c.regex.exec(req.path);
      if (!m) continue;
      pathMatched = true;
      if (c.route.method !== req.method) continue;
      return { route: c.route, params: Object.fromEntries(c.names.map((n, i) => [n, decodeSegment(n, m[i + 1]!)])) };
    }
    if (pathMatched) throw new RequestError(405, 'method_not_allowed', `${req.method} is not allowed on ${safeText(req.path)}`);
    return undefined;
  }
}

function decodeSegment(name: string, raw: string): string {
  let v: string;
  try {
    v = decodeURIComponent(raw);
  } catch {
    throw new RequestError(400, 'invalid_request', `${name}: the path segment is not valid percent-encoding`);
  }
  if (v.includes('\u0000')) throw new RequestError(400, 'invalid_request', `${name}: a NUL character (%00) is not allowed`);
  return v;
}

/** Query values must not hold NUL (PostgreSQL text cannot); a body must be of a type the route takes. */
function checkInput(req: HttpRequest, route: Route): void {
  for (const [k, v] of Object.entries(req.query))
    if (k.includes('\u0000') || v.includes('\u0000'))
      throw new RequestError(400, 'invalid_request', `query parameter ${safeText(k)}: a NUL character (%00) is not allowed`);
  if (!BODY_METHODS.has(req.method)) return;
  const declared = req.headers['content-type'];
  if (route.accepts) {
    if (declared !== undefined && !route.accepts.includes(mediaType(declared)))
      throw new RequestError(
        415,
        'unsupported_media_type',
        `content type ${mediaType(declared) || '(empty)'} is not accepted; send ${route.accepts.join(', ')}`,
      );
    return;
  }
  // JSON routes: a declared type must be JSON, and a body must declare it (a cross-site form can
  // send only form and text types, so this also keeps browsers' simple requests out).
  if (declared !== undefined && !isJsonType(declared))
    throw new RequestError(
      415,
      'unsupported_media_type',
      `content type ${mediaType(declared) || '(empty)'} is not accepted; send application/json`,
    );
  if (declared === undefined && req.body)
    throw new RequestError(415, 'unsupported_media_type', 'content-type is missing; send application/json');
}

const safeText = (s: string) => s.replaceAll('\u0000', '\\u0000').slice(0, 300);

/**
 * The response for a thrown error. Ours carry a reason meant for the caller; anything else is a
 * bug or an outage whose message may hold paths, SQL or stack details, so the caller gets a
 * generic 500 and the log gets the error.
 */
export function errorResponse(err: unknown): HttpResponse {
  if (err instanceof RequestError) return { status: err.status, body: { error: err.code, detail: err.detail, ...err.extra } };
  if (err instanceof MsgxError && err.errorClass === 'INFRA')
    return { status: 503, body: { error: 'unavailable', detail: `${err.message}; try again later` } };
  if (err instanceof MsgxError) return { status: 400, body: { error: err.errorClass.toLowerCase(), detail: err.message } };
  // A server msgx needs is away (a refused connection, a lost session): the caller may retry, so
  // it is 503 with the reason's code, not a 500 that reads as a bug.
  if (isOutage(err))
    return {
      status: 503,
      body: { error: 'unavailable', detail: `a service msgx needs is unreachable (${outageCode(err)}); try again later` },
    };
  return {
    status: 500,
    body: { error: 'internal', detail: 'the request failed on an unexpected error; the details are in the server log' },
  };
}

/** The first error code along the cause chain (ECONNREFUSED, 57P01 …), else the error's name. */
function outageCode(err: unknown): string {
  for (let e = err; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    if (e.cause === e) break;
  }
  return err instanceof Error ? err.name : 'unknown';
}

export const json = (status: number, body: unknown): HttpResponse => ({ status, body });
