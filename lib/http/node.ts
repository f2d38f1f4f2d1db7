import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import type { AppContext } from '../shared/context.ts';
import type { Router } from './router.ts';
import { type HttpRequest, type HttpResponse, serializeBody } from './types.ts';

/**
 * The twin's HTTP server: each request becomes the same HttpRequest an API Gateway event becomes,
 * so one router serves both. Bodies beyond the size limit are cut off and answered 413 without
 * being buffered whole.
 */
export function startHttpServer(ctx: AppContext, router: Router, o: { port: number; host?: string }): Promise<Server> {
  const server = createServer((req, res) => {
    void handle(ctx, router, req, res);
  });
  server.keepAliveTimeout = 65_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host ?? '127.0.0.1', () => resolve(server));
  });
}

async function handle(ctx: AppContext, router: Router, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    const limit = ctx.config.http.maxBodyBytes;
    const body = await readBody(req, limit);
    if (body === null) return send(res, { status: 413, body: { error: 'payload_too_large', detail: `the body is larger than ${limit} bytes` } });
    const url = new URL(req.url ?? '/', 'http://twin');
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k.toLowerCase()] = v;
    const request: HttpRequest = {
      method: (req.method ?? 'GET').toUpperCase(),
      path: url.pathname,
      headers,
      query: Object.fromEntries(url.searchParams),
      body,
      params: {},
      isAdmin: isTwinAdmin(ctx.config.http.adminToken, headers.authorization, req.socket.remoteAddress),
    };
    send(res, await router.handle(request, ctx));
  } catch (err) {
    send(res, { status: 500, body: { error: 'internal', detail: String(err) } });
  }
}

/** Admin in the twin: the bearer token when one is set, else any caller on loopback. */
export function isTwinAdmin(token: string | undefined, authorization: string | undefined, remote: string | undefined): boolean {
  if (token) {
    const given = Buffer.from(authorization?.replace(/^Bearer\s+/i, '') ?? '');
    const want = Buffer.from(token);
    return given.length === want.length && timingSafeEqual(given, want);
  }
  return remote === '127.0.0.1' || remote === '::1' || remote === '::ffff:127.0.0.1';
}

function readBody(req: IncomingMessage, limit: number): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) over = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(over ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function send(res: ServerResponse, r: HttpResponse): void {
  const { headers, body } = serializeBody(r);
  res.writeHead(r.status, headers);
  res.end(body);
}
