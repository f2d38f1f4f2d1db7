import type { AppContext } from '../app/context.ts';
import { InvalidFieldError } from '../http/errors.ts';
import { calendarDayProblem } from '../shared/calendarDay.ts';
import { InfraError, RequestError } from '../shared/errors.ts';
import { reconcileRequest, writeAndConfirm } from './reconcile.ts';
import {
  expireOverdue,
  getRequest,
  listUnconfirmed,
  markSendAttempt,
  markSent,
  type ReqKind,
  type ReqRow,
  registerRequest,
} from './track.ts';

export interface RequestResult {
  id: number;
  kind: ReqKind;
  scope: string;
  sender: string;
  receiver: string;
  status: ReqRow['status'];
  outboundId: number | null;
  shadow: boolean;
  /** True when an earlier, unconfirmed write of the same request was found in COUTMSGS instead of writing again. */
  reconciled?: boolean;
}

type Ctx = Pick<AppContext, 'db' | 'mailbox' | 'config' | 'clock'>;

/**
 * Sends a request upstream: REGISTERED in PostgreSQL first (expiring the open one of its kind),
 * then the COUTMSGS row outside any transaction, then SENT only once the row is confirmed to
 * exist. The send time is recorded before the write, so a request left REGISTERED with a send
 * time is known to be "maybe written": it is reconciled against COUTMSGS by its own marker (our
 * SEQN) before anything is resent — here at once, else by the sweep (docs/flights.md "Requests"). In shadow
 * mode nothing is written to the shared mailbox and the request stays REGISTERED until it times out.
 */
async function send(ctx: Ctx, kind: ReqKind, scope: string): Promise<RequestResult> {
  const base = { kind, scope, ...ctx.config.requests, shadow: ctx.config.shadow };
  // Asked again while the last request of this kind may have been written: look before writing
  // another. Found for the same scope → that request is the answer, nothing is written twice.
  if (!ctx.config.shadow) {
    const open = (await listUnconfirmed(ctx.db)).find((r) => r.kind === kind);
    if (open && (await reconcileRequest(ctx, open)) === 'confirmed' && open.scope === scope) {
      const now = await getRequest(ctx.db, open.id);
      return {
        ...base,
        sender: open.sender,
        receiver: open.receiver,
        id: open.id,
        status: now!.status,
        outboundId: now!.outbound_id,
        reconciled: true,
      };
    }
  }
  const req = await ctx.db.tx((tx) => registerRequest(tx, kind, scope, ctx.config.requests, ctx.clock.now()));
  const result: RequestResult = { ...base, id: req.id, status: 'REGISTERED', outboundId: null };
  if (ctx.config.shadow) return result;
  // The send time is taken before writing: upstream cannot answer before it reads the row.
  const sentAt = ctx.clock.now();
  await markSendAttempt(ctx.db, req.id, sentAt);
  const outboundId = await writeAndConfirm(ctx, req, sentAt);
  if (outboundId === undefined)
    throw new InfraError(`request ${req.id}: COUTMSGS row not confirmed; left REGISTERED, reconciled against COUTMSGS before any resend`);
  const moved = await markSent(ctx.db, req.id, outboundId, sentAt);
  const now = await getRequest(ctx.db, req.id);
  return { ...result, status: moved ? 'SENT' : (now?.status ?? 'EXPIRED'), outboundId };
}

/** RQFD: asks upstream for every flight of `day` (yyyyMMdd); the answer is a SCHD/RESP. */
export async function requestDay(ctx: Ctx, day: string): Promise<RequestResult> {
  const problem = calendarDayProblem(day);
  if (problem) throw new InvalidFieldError('day', problem);
  return send(ctx, 'RQFD', day);
}

/** RQRF: asks upstream for one reference-data set; the answer is a REFD. */
export async function requestReference(ctx: Ctx, rtype: string): Promise<RequestResult> {
  if (!/^[A-Z0-9_]{1,32}$/.test(rtype)) throw new RequestError(400, 'invalid_request', `rtype "${rtype}" is not a reference type code`);
  return send(ctx, 'RQRF', rtype);
}

/** Called by the sweep role: open requests past MSGX_REQUEST_TIMEOUT become EXPIRED. */
export async function expireRequests(ctx: Pick<AppContext, 'db' | 'config' | 'clock'>): Promise<number> {
  const rows = await expireOverdue(ctx.db, ctx.clock.now(), ctx.config.lifecycle.requestTimeoutMs);
  return rows.length;
}
