import { loadConfig } from '../config/config.ts';
import { buildRouter } from '../http/app.ts';
import { cliActor } from '../http/actor.ts';
import { type SignableRequest, signingRegion, sigv4Signer } from './sigv4.ts';
import { silentLog } from '../observability/logger.ts';
import { buildContext, closeContext } from '../app/buildContext.ts';
import type { AppContext } from '../app/context.ts';
import { POOL_SIZE } from '../constants.ts';

/**
 * The CLI is a client of the admin API, so every command has exactly one implementation (the
 * route). With MSGX_API_URL it calls the cloud API, signing with SigV4 (an execute-api host, or
 * `--sigv4` / MSGX_API_SIGV4=1 for a custom domain); with MSGX_PG_URL it runs the routes
 * in-process against the database; otherwise it talks to the running twin over HTTP (the
 * embedded database belongs to the twin's process).
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
    super(`${status} ${describe(status, body)}`);
  }
}

/**
 * msgx answers `{error, detail}`; API Gateway answers `{message}` when it refuses a call before
 * msgx sees it (an unsigned or badly signed request), which an operator fixes on the laptop.
 */
function describe(status: number, body: unknown): string {
  const b = (typeof body === 'object' && body !== null ? body : {}) as { error?: unknown; detail?: unknown; message?: unknown };
  if (typeof b.error === 'string') return `${b.error}: ${typeof b.detail === 'string' ? b.detail : JSON.stringify(body)}`;
  if (typeof b.message === 'string')
    return status === 403
      ? `${b.message} (API Gateway refused the call before msgx saw it: sign with credentials of this API's account, AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, and its region, AWS_REGION)`
      : b.message;
  return `: ${typeof body === 'string' ? body : JSON.stringify(body)}`;
}

export async function openAdminApi(env = process.env, o: { sigv4?: boolean } = {}): Promise<AdminApi> {
  if (env.MSGX_API_URL) return cloudApi(env.MSGX_API_URL, env, o.sigv4 === true || ['1', 'true'].includes(env.MSGX_API_SIGV4 ?? ''));
  if (o.sigv4) throw new Error('--sigv4 signs calls to the cloud API: set MSGX_API_URL to it');
  if (env.MSGX_PG_URL) return inProcess(await buildContext(loadConfig(env), { log: silentLog, poolSize: POOL_SIZE.operator }));
  const base = env.MSGX_TWIN_URL ?? `http://127.0.0.1:${env.MSGX_HTTP_PORT ?? 8080}`;
  return overHttp(base, {
    token: env.MSGX_ADMIN_TOKEN,
    what: 'the twin',
    hint: 'start it with npm start, or set MSGX_PG_URL to work on the database directly',
  });
}

function cloudApi(raw: string, env: Record<string, string | undefined>, asked: boolean): AdminApi {
  let base: URL;
  try {
    base = new URL(raw);
  } catch {
    throw new Error(`MSGX_API_URL: not a URL (${raw}); give the API's endpoint, e.g. https://<apiId>.execute-api.<region>.amazonaws.com`);
  }
  const region = signingRegion(base, env, asked);
  return overHttp(base.href, {
    sign: region ? sigv4Signer(region) : undefined,
    what: region ? `the API at ${base.host} (SigV4, ${region})` : `the API at ${base.host}`,
    hint: 'check MSGX_API_URL and your network',
  });
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

function overHttp(
  base: string,
  o: { token?: string; sign?: (req: SignableRequest) => Promise<Record<string, string>>; what: string; hint: string },
): AdminApi {
  return {
    mode: o.what === 'the twin' ? `twin at ${base}` : o.what,
    async call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
      const url = new URL(path, base);
      const text = body === undefined ? undefined : JSON.stringify(body);
      let headers: Record<string, string> = {
        'content-type': 'application/json',
        'x-msgx-actor': cliActor(),
        ...(o.token ? { authorization: `Bearer ${o.token}` } : {}),
      };
      // Signed after everything else is set: a header changed later would break the signature.
      if (o.sign) headers = await o.sign({ method, url, headers, body: text });
      let res: Response;
      try {
        res = await fetch(url, { method, headers, body: text, signal: AbortSignal.timeout(30_000) });
      } catch (err) {
        throw new Error(`cannot reach ${o.what === 'the twin' ? `the twin at ${base}` : o.what} (${(err as Error).message}); ${o.hint}`);
      }
      const answer = await res.text();
      const parsed = answer && res.headers.get('content-type')?.includes('json') ? JSON.parse(answer) : answer;
      if (!res.ok) throw new AdminCallError(res.status, parsed);
      return parsed as T;
    },
    close: async () => {},
  };
}
