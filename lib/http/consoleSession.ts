import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The console's sign-in in the twin (MSGX_ADMIN_TOKEN set): a browser cannot add a bearer header
 * to a page load, so a login POST sets this cookie. It holds a value derived from the token, not
 * the token: the browser never keeps the admin token itself. `HttpOnly` (no script reads it),
 * `SameSite=Strict` (no other site sends it), one per path the console uses (its pages and the
 * admin API), `Secure` when the page came over https.
 */
export const SESSION_COOKIE = 'msgx_console';
const COOKIE_PATHS = ['/console', '/admin'] as const;

export function sessionValue(token: string): string {
  return createHmac('sha256', token).update('msgx console session').digest('base64url');
}

/** The cookie header carries the session of `token`. */
export function hasConsoleSession(token: string | undefined, cookieHeader: string | undefined): boolean {
  if (!token || !cookieHeader) return false;
  const want = Buffer.from(sessionValue(token));
  for (const part of cookieHeader.split(';')) {
    const i = part.indexOf('=');
    if (i <= 0 || part.slice(0, i).trim() !== SESSION_COOKIE) continue;
    const given = Buffer.from(part.slice(i + 1).trim());
    if (given.length === want.length && timingSafeEqual(given, want)) return true;
  }
  return false;
}

/** Set-Cookie values that sign in (`token`) or out (undefined). */
export function sessionCookies(token: string | undefined, o: { secure: boolean }): string[] {
  const value = token ? sessionValue(token) : '';
  const life = token ? '' : '; Max-Age=0';
  return COOKIE_PATHS.map(
    (path) => `${SESSION_COOKIE}=${value}; Path=${path}; HttpOnly; SameSite=Strict${o.secure ? '; Secure' : ''}${life}`,
  );
}
