/** The admin API of the same origin. Every call names the console as its actor (audit_log). */

export const BASE = location.pathname.replace(/\/console(\/.*)?$/, '');

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

/**
 * Calls the API; the answer is typed by the caller (src/model.ts). Throws ApiError on a non-2xx.
 * In a twin with MSGX_ADMIN_TOKEN the browser sends the HttpOnly session cookie the sign-in set;
 * this script never handles a credential.
 */
export async function api<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', 'x-msgx-actor': 'console' };
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
