import { timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readMessageTrace } from '../observability/trace.ts';
import { eventsBySource } from '../outbox/sourceEvents.ts';
import { readThroughput } from '../observability/throughput.ts';
import type { AppContext } from '../app/context.ts';
import { RequestError } from '../shared/errors.ts';
import { hasConsoleSession, sessionCookies } from './consoleSession.ts';
import { idParam } from './params.ts';
import { intParam, parseQuery } from './query.ts';
import { json } from './router.ts';
import type { HttpRequest, HttpResponse, Route } from './types.ts';

/**
 * The operations console (`GET /console`, files under lib/http/console) and
 * the read routes it needs beyond the existing admin API: the inbound message trace, the
 * per-minute throughput for the overview chart, and events by source (for the deliveries of a
 * transactional message).
 *
 * The console's files are operator-only like the admin routes. A browser cannot add a bearer
 * header to a page load, so in the twin with MSGX_ADMIN_TOKEN set its sign-in form posts the
 * token to `POST /console/login`, which answers with an HttpOnly, SameSite=Strict session cookie
 * for /console and /admin (consoleSession.ts); no script ever sees the token or the cookie. In
 * the cloud the gateway's IAM guards `/console` like `/admin`.
 */

// Beside this module: lib/http/console/ in the repository; in a Lambda bundle, the folder of
// index.mjs (test/infra/bundling.test.ts checks this module is not split into a chunk).
const CONSOLE_DIR = fileURLToPath(new URL('./console/', import.meta.url));

/**
 * /console/app.js is TypeScript (console/src/, split by page) bundled by esbuild. Where the sources
 * are beside this module (the twin run by tsx, the tests), it is built in-process on its first
 * request and kept for the process's life, so `npm install && npm start` serves it with no build
 * step and it can never be stale. The Lambda bundle carries no sources: infra-cdk/bundle.ts writes
 * the built app.js beside the function at synth (console/build.ts, the one build definition), and
 * it is read from there. The builder is imported by a computed path, so esbuild leaves it (and
 * esbuild itself) out of the Lambda bundle.
 */
export async function loadConsoleScript(dir: string): Promise<string> {
  if (existsSync(join(dir, 'src', 'main.ts'))) {
    const builder = pathToFileURL(join(dir, 'build.ts')).href;
    const { buildConsoleScript } = (await import(builder)) as typeof import('./console/build.ts');
    return buildConsoleScript();
  }
  return readFile(join(dir, 'app.js'), 'utf8');
}

let consoleScript: Promise<string> | undefined;

function script(): Promise<string> {
  consoleScript ??= loadConsoleScript(CONSOLE_DIR).catch((err: unknown) => {
    consoleScript = undefined; // a failed build is tried again on the next request
    throw err;
  });
  return consoleScript;
}

/**
 * The console's files: a fixed list, so no request path ever reaches the file system. A Map, not
 * an object literal, so inherited names (`constructor`, `__proto__`) are not assets.
 */
const ASSETS = new Map<string, string>([
  ['index.html', 'text/html; charset=utf-8'],
  ['app.js', 'text/javascript; charset=utf-8'],
  ['style.css', 'text/css; charset=utf-8'],
  ['login.html', 'text/html; charset=utf-8'],
]);

const SECURITY_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

const PAGE_CSP =
  "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";
/** The sign-in page runs no script at all; its style is inline, and its form posts only here. */
const LOGIN_CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

async function asset(name: string, extra: Record<string, string> = {}, status = 200): Promise<HttpResponse> {
  const type = ASSETS.get(name);
  if (!type) throw new RequestError(404, 'not_found', `no console asset ${name}`);
  const body = name === 'app.js' ? await script() : await readFile(CONSOLE_DIR + name, 'utf8');
  return { status, headers: { 'content-type': type, ...SECURITY_HEADERS, ...extra }, body };
}

/** An operator: the router's verdict (bearer, loopback, IAM, or the twin's console session). */
export function consoleAdmin(req: HttpRequest, ctx: Pick<AppContext, 'config'>): boolean {
  return req.isAdmin || (ctx.config.runtime === 'twin' && hasConsoleSession(ctx.config.http.adminToken, req.headers.cookie));
}

/** The sign-in page, with a line saying why it is shown again. */
async function loginPage(status: number, message = ''): Promise<HttpResponse> {
  const page = (await readFile(CONSOLE_DIR + 'login.html', 'utf8')).replace('<!--message-->', message);
  return {
    status,
    headers: { 'content-type': 'text/html; charset=utf-8', ...SECURITY_HEADERS, 'content-security-policy': LOGIN_CSP },
    body: page,
  };
}

/** `POST /console/login` (form `token=…`): a session cookie and a redirect to the console, or the page again. */
async function login(req: HttpRequest, ctx: AppContext): Promise<HttpResponse> {
  const token = ctx.config.http.adminToken;
  if (!token || ctx.config.runtime !== 'twin')
    throw new RequestError(
      404,
      'not_found',
      'no sign-in here: the console needs no token (MSGX_ADMIN_TOKEN is not set) or is guarded by IAM',
    );
  const given = Buffer.from(new URLSearchParams(req.body).get('token') ?? '');
  const want = Buffer.from(token);
  if (given.length !== want.length || !timingSafeEqual(given, want))
    return loginPage(401, '<p class="bad" role="alert">That is not the admin token (MSGX_ADMIN_TOKEN).</p>');
  const secure = req.headers['x-forwarded-proto']?.split(',')[0]?.trim() === 'https';
  return { status: 303, headers: { location: '/console', ...SECURITY_HEADERS }, cookies: sessionCookies(token, { secure }) };
}

async function guarded(req: HttpRequest, ctx: AppContext, name: string): Promise<HttpResponse> {
  if (consoleAdmin(req, ctx)) return asset(name, name.endsWith('.html') ? { 'content-security-policy': PAGE_CSP } : {});
  // A page load with a token configured gets the sign-in page; everything else the admin routes' 403.
  if (ctx.config.http.adminToken && ctx.config.runtime === 'twin' && name === 'index.html') return loginPage(401);
  throw new RequestError(403, 'forbidden', 'admin route: operator credentials required');
}

export const consoleRoutes: Route[] = [
  { method: 'GET', path: '/console', handle: (req, ctx) => guarded(req, ctx, 'index.html') },
  { method: 'POST', path: '/console/login', accepts: ['application/x-www-form-urlencoded'], handle: login },
  {
    method: 'POST',
    path: '/console/logout',
    async handle(req) {
      const secure = req.headers['x-forwarded-proto']?.split(',')[0]?.trim() === 'https';
      return { status: 303, headers: { location: '/console', ...SECURITY_HEADERS }, cookies: sessionCookies(undefined, { secure }) };
    },
  },
  {
    method: 'GET',
    path: '/console/{asset}',
    handle: (req, ctx) => {
      const name = req.params.asset!;
      if (!ASSETS.has(name) || name === 'login.html') throw new RequestError(404, 'not_found', `no console asset ${name}`);
      return guarded(req, ctx, name);
    },
  },
  {
    method: 'GET',
    path: '/admin/trace/{msgId}',
    admin: true,
    async handle(req, ctx) {
      const id = idParam(req, 'msgId');
      const trace = await readMessageTrace(ctx.db, id, { mailbox: ctx.mailbox });
      if (!trace) throw new RequestError(404, 'not_found', `no message ${id} (never enqueued, or past retention)`);
      return json(200, trace);
    },
  },
  {
    method: 'GET',
    path: '/admin/throughput',
    admin: true,
    async handle(req, ctx) {
      const { minutes } = parseQuery(req, z.object({ minutes: intParam(1, 1440, 60) }));
      return json(200, await readThroughput(ctx.db, ctx.clock.now(), minutes));
    },
  },
  {
    method: 'GET',
    path: '/admin/events',
    admin: true,
    async handle(req, ctx) {
      const { sourceKind, sourceId } = req.query;
      if (!sourceKind || !sourceId) throw new RequestError(400, 'invalid_request', 'sourceKind and sourceId are required');
      if (!['proc', 'txmsg', 'external'].includes(sourceKind))
        throw new RequestError(400, 'invalid_request', `sourceKind: must be proc, txmsg or external (got ${sourceKind})`);
      const items = (await eventsBySource(ctx.db, sourceKind, sourceId)).map(({ value: _v, ...e }) => e);
      return json(200, { sourceKind, sourceId, items });
    },
  },
];
