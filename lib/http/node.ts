import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import type { AppContext } from '../app/context.ts';
import { RequestError } from '../shared/errors.ts';
import { hasConsoleSession } from './consoleSession.ts';
import { guardLocalRequest } from './localGuard.ts';
import { errorResponse, type Router } from './router.ts';
import { type HttpRequest, type HttpResponse, serializeBody } from './types.ts';

/**
 * The twin's HTTP server: each request becomes the same HttpRequest an API Gateway event becomes,
 * so one router serves both. Before that, what only a server on a developer's machine needs:
 * the Host/Origin guard (localGuard.ts), and bodies bounded in size and time — a Content-Length
 * over the limit is refused unread, a longer stream is cut off at the limit, and a client that
 * stops sending gets 408 after MSGX_HTTP_REQUEST_TIMEOUT. After such a refusal what the client
 * still sends is read and thrown away for a bounded while (lingerThenClose), so it reads its answer.
 */
export function startHttpServer(ctx: AppContext, router: Router, o: { port: number; host?: string }): Promise<Server> {
  const timeoutMs = ctx.config.http.requestTimeoutMs;
  const server = createServer(
    {
      // Node's own limits are the backstop for clients that never finish their headers; the
      // body deadline below answers first with a JSON 408.
      headersTimeout: timeoutMs,
      requestTimeout: timeoutMs * 2,
      connectionsCheckingInterval: Math.min(30_000, Math.max(50, Math.floor(timeoutMs / 4))),
    },
    (req, res) => void handle(ctx, router, req, res),
  );
  server.keepAliveTimeout = 65_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host ?? '127.0.0.1', () => resolve(server));
  });
}

async function handle(ctx: AppContext, router: Router, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const method = (req.method ?? 'GET').toUpperCase();
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k.toLowerCase()] = v;
  try {
    guardLocalRequest(
      { method, headers, localAddress: req.socket.localAddress, localPort: req.socket.localPort },
      { host: ctx.config.http.host, allowedHosts: ctx.config.http.allowedHosts },
    );
    const body = await readBody(req, ctx.config.http.maxBodyBytes, ctx.config.http.requestTimeoutMs);
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://twin');
    } catch {
      throw new RequestError(400, 'invalid_request', 'the request target is not a valid URL path');
    }
    const request: HttpRequest = {
      method,
      path: url.pathname,
      headers,
      query: Object.fromEntries(url.searchParams),
      body,
      params: {},
      isAdmin:
        isTwinAdmin(ctx.config.http.adminToken, headers.authorization, req.socket.remoteAddress) ||
        hasConsoleSession(ctx.config.http.adminToken, headers.cookie),
    };
    send(res, await router.handle(request, ctx));
  } catch (err) {
    if (!(err instanceof RequestError)) ctx.log.error('request failed', { method, path: req.url?.slice(0, 300), error: err as Error });
    const r = errorResponse(err);
    if (req.complete) return send(res, r);
    // The connection is not reused: what follows on it is the rest of a refused body.
    const { maxBodyBytes, requestTimeoutMs } = ctx.config.http;
    lingerThenClose(req, Math.max(LINGER_MIN_BYTES, maxBodyBytes), Math.min(LINGER_MAX_MS, requestTimeoutMs));
    send(res, { ...r, headers: { ...r.headers, connection: 'close' } });
  }
}

/** How much of a refused body is still read and discarded (at least; MSGX_MAX_BODY_BYTES when larger). */
export const LINGER_MIN_BYTES = 8 * 1024 * 1024;
/** For how long, at most (or MSGX_HTTP_REQUEST_TIMEOUT when shorter). */
export const LINGER_MAX_MS = 5_000;

/**
 * A refusal sent while the client is still sending its body (413, 408, a guard's 403): closing
 * the socket with unread data in it makes the kernel reset the connection, and a client that is
 * still writing then fails with EPIPE or ECONNRESET before it reads the answer (Node's fetch
 * reports "fetch failed", not the 413). So the rest is read and thrown away, up to `maxBytes` or
 * `maxMs`, whichever comes first, and only then is the connection closed.
 */
function lingerThenClose(req: IncomingMessage, maxBytes: number, maxMs: number): void {
  const socket = req.socket;
  // After a `Connection: close` answer Node calls destroySoon(): end, then destroy once written —
  // the reset. Here it only ends (FIN after the answer); the socket is destroyed when the client
  // has sent the rest or a bound is reached.
  const destroySoon = socket.destroySoon.bind(socket);
  socket.destroySoon = () => void socket.end();
  let read = 0;
  // The answer is queued before this can run (send() writes synchronously), and destroySoon
  // lets it flush before the socket goes.
  const close = () => {
    clearTimeout(timer);
    req.removeListener('data', onData);
    destroySoon();
  };
  const onData = (c: Buffer) => {
    read += c.length;
    if (read > maxBytes) close();
  };
  const timer = setTimeout(close, maxMs);
  req.on('data', onData);
  req.once('end', close);
  req.once('close', close);
  socket.once('close', close);
  req.resume();
}

/**
 * Admin in the twin: `Authorization: Bearer <MSGX_ADMIN_TOKEN>` when a token is set (the token
 * never travels in a URL or a bare header; the console's browser instead holds the session cookie
 * its sign-in set, lib/http/consoleSession.ts), else any caller on loopback.
 */
export function isTwinAdmin(token: string | undefined, authorization: string | undefined, remote: string | undefined): boolean {
  if (token) {
    const m = /^Bearer ([^\s]+)$/i.exec(authorization?.trim() ?? '');
    if (!m) return false;
    const given = Buffer.from(m[1]!);
    const want = Buffer.from(token);
    return given.length === want.length && timingSafeEqual(given, want);
  }
  return remote === '127.0.0.1' || remote === '::1' || remote === '::ffff:127.0.0.1';
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The body as text (400 when it is not UTF-8): 413 past `limit` bytes (declared or streamed), 408 when it is not all in within `timeoutMs`. */
function readBody(req: IncomingMessage, limit: number, timeoutMs: number): Promise<string> {
  const tooLarge = () => new RequestError(413, 'payload_too_large', `the body is larger than ${limit} bytes`);
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (err?: RequestError) => {
      clearTimeout(timer);
      req.removeListener('data', onData);
      if (err) {
        req.pause(); // read no further; the caller answers and closes the connection
        reject(err);
      } else {
        // Invalid UTF-8 is refused, not silently turned into U+FFFD (not well-formed input).
        try {
          resolve(UTF8.decode(Buffer.concat(chunks)));
        } catch {
          reject(new RequestError(400, 'malformed', 'the body is not valid UTF-8'));
        }
      }
    };
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) done(tooLarge());
      else chunks.push(c);
    };
    const timer = setTimeout(
      () => done(new RequestError(408, 'request_timeout', `the body did not arrive within ${timeoutMs} ms`)),
      timeoutMs,
    );
    req.on('data', onData);
    req.once('end', () => done());
    // The client went away mid-body: nobody reads the answer, and it is not a server error.
    req.once('error', () => done(new RequestError(400, 'aborted', 'the client closed the connection before the body was complete')));
  });
}

export function send(res: ServerResponse, r: HttpResponse): void {
  if (res.headersSent) return;
  const { headers, body } = serializeBody(r);
  if (r.cookies?.length) res.setHeader('set-cookie', r.cookies);
  res.writeHead(r.status, headers);
  res.end(body);
}
