import { encodeRqfd, encodeRqrf } from '../codec/encode.ts';
import type { AppContext } from '../app/context.ts';
import type { ReqRow } from './track.ts';

/**
 * The request's wire text, from and to the parties it was registered with: its SEQN is its ID,
 * which with its sender and type is the marker it is found by in COUTMSGS.
 */
export function encodeRequest(
  ctx: Pick<AppContext, 'config'>,
  req: Pick<ReqRow, 'id' | 'kind' | 'scope' | 'sender' | 'receiver'>,
  at: Date,
): string {
  const m = { sender: req.sender, receiver: req.receiver, seqn: String(req.id), at, timezone: ctx.config.timezone };
  return req.kind === 'RQFD' ? encodeRqfd(m, req.scope) : encodeRqrf(m, req.scope);
}
