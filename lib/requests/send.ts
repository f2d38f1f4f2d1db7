import { encodeRqfd, encodeRqrf } from '../codec/encode.ts';
import type { AppContext } from '../shared/context.ts';
import { InfraError, RequestError } from '../shared/errors.ts';
import { expireOverdue, getRequest, markSent, type ReqKind, type ReqRow, registerRequest } from './track.ts';

export interface RequestResult {
  id: number;
  kind: ReqKind;
  scope: string;
  status: ReqRow['status'];
  outboundId: number | null;
  shadow: boolean;
}

type Ctx = Pick<AppContext, 'db' | 'mailbox' | 'config' | 'clock'>;

/**
 * Sends a request upstream: REGISTERED in PostgreSQL first (expiring the open one of its kind),
 * then the COUTMSGS row outside any transaction, then SENT only once the row is confirmed to
 * exist. A crash in between leaves it REGISTERED, and the timeout expires it; its SEQN (our
 * request ID) makes a duplicate recognisable upstream. In shadow mode nothing is written to the
 * shared mailbox and the request stays REGISTERED until it times out.
 */
async function send(ctx: Ctx, kind: ReqKind, scope: string, encode: (seqn: string, at: Date) => string): Promise<RequestResult> {
  const req = await ctx.db.tx((tx) => registerRequest(tx, kind, scope, ctx.clock.now()));
  const result: RequestResult = { id: req.id, kind, scope, status: 'REGISTERED', outboundId: null, shadow: ctx.config.shadow };
  if (ctx.config.shadow) return result;
  // The send time is taken before writing: upstream cannot answer before it reads the row.
  const sentAt = ctx.clock.now();
  const outboundId = await ctx.mailbox.insertOutbound(encode(String(req.id), sentAt));
  if (!(await ctx.mailbox.outboundExists(outboundId)))
    throw new InfraError(`request ${req.id}: COUTMSGS row ${outboundId} not confirmed; left REGISTERED`);
  const moved = await markSent(ctx.db, req.id, outboundId, sentAt);
  const now = await getRequest(ctx.db, req.id);
  return { ...result, status: moved ? 'SENT' : (now?.status ?? 'EXPIRED'), outboundId };
}

const meta = (ctx: Ctx, seqn: string, at: Date) => ({ sender: 'MSGX', receiver: 'FIMS', seqn, at, timezone: ctx.config.timezone });

/** RQFD: asks upstream for every flight of `day` (yyyyMMdd); the answer is a SCHD/RESP. */
export async function requestDay(ctx: Ctx, day: string): Promise<RequestResult> {
  if (!/^\d{8}$/.test(day)) throw new RequestError(400, 'invalid_request', `day "${day}" is not YYYYMMDD`);
  return send(ctx, 'RQFD', day, (seqn, at) => encodeRqfd(meta(ctx, seqn, at), day));
}

/** RQRF: asks upstream for one reference-data set; the answer is a REFD. */
export async function requestReference(ctx: Ctx, rtype: string): Promise<RequestResult> {
  if (!/^[A-Z0-9_]{1,32}$/.test(rtype)) throw new RequestError(400, 'invalid_request', `rtype "${rtype}" is not a reference type code`);
  return send(ctx, 'RQRF', rtype, (seqn, at) => encodeRqrf(meta(ctx, seqn, at), rtype));
}

/** Called by the sweep role: open requests past MSGX_REQUEST_TIMEOUT become EXPIRED. */
export async function expireRequests(ctx: Pick<AppContext, 'db' | 'config' | 'clock'>): Promise<number> {
  const rows = await expireOverdue(ctx.db, ctx.clock.now(), ctx.config.lifecycle.requestTimeoutMs);
  return rows.length;
}
