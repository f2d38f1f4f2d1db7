/** The admin API of the same origin. Every call names the console as its actor (audit_log). */

export const BASE = location.pathname.replace(/\/console(\/.*)?$/, '');

/** The admin token the sign-in page keeps in a cookie (twin with MSGX_ADMIN_TOKEN), if any. */
export function token(): string | null {
  const m = document.cookie.match(/(?:^|;\s*)msgx_admin_token=([^;]*)/);
  return m ? decodeURIComponent(m[1] ?? '') : null;
}

interface ErrorBody {
  error?: string;
  detail?: string;
}

export class ApiError extends Error {
  readonly status: number;
  readonly body: ErrorBody | null;
  constructor(status: number, body: ErrorBody | null) {
    super(body?.detail ?? body?.error ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** Calls the API; the answer is typed by the caller (src/model.ts). Throws ApiError on a non-2xx. */
export async function api<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', 'x-msgx-actor': 'console' };
  const t = token();
  if (t) headers.authorization = `Bearer ${t}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(BASE + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { error: 'bad_response', detail: text.slice(0, 200) };
  }
  if (!res.ok) throw new ApiError(res.status, data as ErrorBody | null);
  return data as T;
}
