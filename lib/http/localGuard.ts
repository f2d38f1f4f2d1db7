import { isIP } from 'node:net';
import { RequestError } from '../shared/errors.ts';

/**
 * The twin's guard against web pages: it runs on a developer's machine, where loopback callers
 * are operators, so a page in the developer's browser must not be able to drive it.
 * - DNS rebinding: a page on `evil.example` re-pointed at 127.0.0.1 sends `Host: evil.example`,
 *   so only the names the twin is reached by are answered (loopback names, MSGX_HTTP_HOST,
 *   the socket's own IP, MSGX_HTTP_ALLOWED_HOSTS), on the port it listens on.
 * - Cross-site requests (a `<form>` post, `fetch` in no-cors mode) carry `Origin` and
 *   `Sec-Fetch-Site`: on a state-changing method they must name the twin itself.
 * Clients that are not browsers (curl, the CLI, producers) send neither and are unaffected.
 * Not used behind API Gateway, which has its own host and IAM.
 */
export interface GuardSettings {
  /** MSGX_HTTP_HOST */
  host: string;
  /** MSGX_HTTP_ALLOWED_HOSTS: `name` (any port) or `name:port` */
  allowedHosts: string[];
}

export interface GuardRequest {
  method: string;
  headers: Record<string, string | undefined>;
  /** The address and port this connection reached (the socket's local end). */
  localAddress?: string;
  localPort?: number;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];
const WILDCARD = new Set(['0.0.0.0', '::', '[::]']);

/** Throws a 4xx RequestError naming the reason, or returns when the request may proceed. */
export function guardLocalRequest(req: GuardRequest, s: GuardSettings): void {
  const hostHeader = req.headers.host;
  if (!hostHeader) throw new RequestError(400, 'host_required', 'the Host header is required');
  if (!hostAllowed(hostHeader, 'http:', req, s))
    throw new RequestError(
      403,
      'host_not_allowed',
      `Host ${hostHeader.slice(0, 100)} is not an address this server listens on; add it to MSGX_HTTP_ALLOWED_HOSTS if it is yours`,
    );
  if (SAFE_METHODS.has(req.method)) return;
  const site = req.headers['sec-fetch-site']?.toLowerCase();
  if (site !== undefined && site !== 'same-origin' && site !== 'none')
    throw new RequestError(403, 'cross_site_request', `a ${site} request may not change state (Sec-Fetch-Site: ${site})`);
  // A browser's own word that the page is this server's settles it: a form posted from a page
  // served with `Referrer-Policy: no-referrer` (the console's sign-in) carries `Origin: null`.
  if (site === 'same-origin') return;
  const origin = req.headers.origin;
  if (origin !== undefined && !originAllowed(origin, req, s))
    throw new RequestError(
      403,
      'cross_site_request',
      `a request from origin ${origin.slice(0, 100)} may not change state; only this server's own pages may`,
    );
}

function originAllowed(origin: string, req: GuardRequest, s: GuardSettings): boolean {
  let url: URL;
  try {
    url = new URL(origin); // "null" (sandboxed frames, file: pages) does not parse and is refused
  } catch {
    return false;
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && hostAllowed(url.host, url.protocol, req, s);
}

function hostAllowed(hostPort: string, scheme: string, req: GuardRequest, s: GuardSettings): boolean {
  const parsed = splitHost(hostPort.toLowerCase(), scheme === 'https:' ? 443 : 80);
  if (!parsed) return false;
  const { name, port } = parsed;
  for (const entry of s.allowedHosts) {
    const e = splitHost(entry.toLowerCase(), 0);
    if (e && e.name === name && (!/:\d+$/.test(entry) || e.port === port)) return true;
  }
  if (port !== req.localPort) return false;
  const own = [...LOOPBACK_NAMES];
  if (!WILDCARD.has(s.host)) own.push(bracket(s.host.toLowerCase()));
  // An IP literal cannot be rebound, so the address the connection reached is always fine.
  if (req.localAddress) own.push(bracket(req.localAddress.replace(/^::ffff:/, '')));
  return own.includes(name);
}

const bracket = (h: string) => (isIP(h) === 6 ? `[${h}]` : h);

/** `name[:port]`, `[v6][:port]` → parts; undefined when it is not a host. */
function splitHost(h: string, defaultPort: number): { name: string; port: number } | undefined {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::(\d{1,5}))?$/.exec(h);
  if (!m) return undefined;
  return { name: m[1]!, port: m[2] === undefined ? defaultPort : Number(m[2]) };
}
