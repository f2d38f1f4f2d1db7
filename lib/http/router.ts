import { MsgxError, RequestError } from '../shared/errors.ts';
import type { AppContext } from '../shared/context.ts';
import type { HttpRequest, HttpResponse, Route } from './types.ts';

interface Compiled {
  route: Route;
  regex: RegExp;
  names: string[];
}

/** Matches a request to a route and turns every thrown error into `{error, detail}` JSON. */
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
    let pathMatched = false;
    for (const c of this.#routes) {
      const m = c.regex.exec(req.path);
      if (!m) continue;
      pathMatched = true;
      if (c.route.method !== req.method) continue;
      if (c.route.admin && !req.isAdmin) return errorResponse(new RequestError(403, 'forbidden', 'admin route: operator credentials required'));
      const params: Record<string, string> = {};
      c.names.forEach((n, i) => (params[n] = decodeURIComponent(m[i + 1]!)));
      try {
        return await c.route.handle({ ...req, params }, ctx);
      } catch (err) {
        if (!(err instanceof RequestError) && !(err instanceof MsgxError))
          ctx.log.error('request failed', { path: req.path, error: err as Error });
        return errorResponse(err);
      }
    }
    if (pathMatched) return errorResponse(new RequestError(405, 'method_not_allowed', `${req.method} is not allowed on ${req.path}`));
    return errorResponse(new RequestError(404, 'not_found', `no route for ${req.method} ${req.path}`));
  }
}

export function errorResponse(err: unknown): HttpResponse {
  if (err instanceof RequestError) return { status: err.status, body: { error: err.code, detail: err.detail, ...err.extra } };
  if (err instanceof MsgxError) return { status: 400, body: { error: err.errorClass.toLowerCase(), detail: err.message } };
  return { status: 500, body: { error: 'internal', detail: err instanceof Error ? err.message : String(err) } };
}

export const json = (status: number, body: unknown): HttpResponse => ({ status, body });

/** Parses a JSON body or throws a 400 that says why. */
export function parseJsonBody(req: HttpRequest): unknown {
  if (!req.body) throw new RequestError(400, 'invalid_request', 'a JSON body is required');
  try {
    return JSON.parse(req.body);
  } catch (err) {
    throw new RequestError(400, 'invalid_request', `body is not valid JSON: ${(err as Error).message}`);
  }
}
