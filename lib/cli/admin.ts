import { loadConfig } from '../config/config.ts';
import { buildRouter } from '../http/app.ts';
import { cliActor } from '../http/actor.ts';
import { silentLog } from '../observability/logger.ts';
import { buildContext, closeContext } from '../app/buildContext.ts';
import type { AppContext } from '../app/context.ts';

/**
 * The CLI is a client of the admin API, so every command has exactly one implementation (the
 * route). With MSGX_PG_URL set it runs the routes in-process against the database; otherwise it
 * talks to the running twin over HTTP (the embedded database belongs to the twin's process).
 */
export interface AdminApi {
  call<T = unknown>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T>;
  close(): Promise<void>;
  mode: string;
}

export class AdminCallError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    const b = body as { error?: string; detail?: string };
    super(`${status} ${b?.error ?? ''}: ${b?.detail ?? JSON.stringify(body)}`);
  }
}

export async function openAdminApi(env = process.env): Promise<AdminApi> {
  if (env.MSGX_PG_URL) return inProcess(await buildContext(loadConfig(env), { log: silentLog, poolSize: 2 }));
  const base = env.MSGX_TWIN_URL ?? `http://127.0.0.1:${env.MSGX_HTTP_PORT ?? 8080}`;
  return overHttp(base, env.MSGX_ADMIN_TOKEN);
}

function inProcess(ctx: AppContext): AdminApi {
  const router = buildRouter();
  return {
    mode: 'database',
    async call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
      const url = new URL(path, 'http://cli');
      const r = await router.handle(
        {
          method,
          path: url.pathname,
          query: Object.fromEntries(url.searchParams),
          headers: { 'content-type': 'application/json', 'x-msgx-actor': cliActor() },
          body: body === undefined ? '' : JSON.stringify(body),
          params: {},
          isAdmin: true,
        },
        ctx,
      );
      if (r.status >= 400) throw new AdminCallError(r.status, r.body);
      return r.body as T;
    },
    close: () => closeContext(ctx),
  };
}

function overHttp(base: string, token?: string): AdminApi {
  return {
    mode: `twin at ${base}`,
    async call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
      let res: Response;
      try {
        res = await fetch(new URL(path, base), {
          method,
          headers: {
            'content-type': 'application/json',
            'x-msgx-actor': cliActor(),
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(30_000),
        });
      } catch (err) {
        throw new Error(
          `cannot reach the twin at ${base} (${(err as Error).message}); start it with npm start, or set MSGX_PG_URL to work on the database directly`,
        );
      }
      const text = await res.text();
      const parsed = text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text;
      if (!res.ok) throw new AdminCallError(res.status, parsed);
      return parsed as T;
    },
    close: async () => {},
  };
}
