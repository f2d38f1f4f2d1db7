import type { HttpRequest } from './types.ts';

/**
 * Who did an admin action, for audit_log. In the cloud it is the IAM principal API Gateway
 * authenticated, never anything the client wrote (the ingress drops `x-msgx-actor`). In the
 * twin, where the caller already proved to be an operator (token or loopback), the caller's own
 * label `x-msgx-actor` (the console sends `console`, the CLI `cli:<user>`) is kept, else
 * `operator`.
 */
export function actorOf(req: Pick<HttpRequest, 'principal' | 'headers'>): string {
  if (req.principal) return req.principal;
  const label = req.headers['x-msgx-actor']
    ?.replace(/[\u0000-\u001f\u007f]/g, '')
    .trim()
    .slice(0, 200);
  return label || 'operator';
}

/**
 * The CLI's label, `cli:<user>`: sent as `x-msgx-actor` on its admin calls (where `actorOf`
 * decides), and the actor of a command it runs on the database itself (`npx msgx identity`).
 */
export function cliActor(user: string | undefined = process.env.USER): string {
  return `cli:${user ?? 'operator'}`;
}
