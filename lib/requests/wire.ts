import { encodeRqfd, encodeRqrf } from '../codec/encode.ts';
import type { AppContext } from '../app/context.ts';
import type { ReqRow } from './track.ts';

const meta = (ctx: Pick<AppContext, 'config'>, seqn: string, at: Date) => ({
  sender: 'MSGX',
  receiver: 'FIMS',
  seqn,
  at,
  timezone: ctx.config.timezone,
});

/** The request's wire text: its SEQN is its ID, the marker it is found by in COUTMSGS. */
export function encodeRequest(ctx: Pick<AppContext, 'config'>, req: Pick<ReqRow, 'id' | 'kind' | 'scope'>, at: Date): string {
  const m = meta(ctx, String(req.id), at);
  return req.kind === 'RQFD' ? encodeRqfd(m, req.scope) : encodeRqrf(m, req.scope);
}
