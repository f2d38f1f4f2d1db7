import type { AppContext } from '../app/context.ts';
import { encodeRequest } from './wire.ts';
import { appendAudit, listUnconfirmed, markSendAttempt, markSent, type ReqRow } from './track.ts';

type Ctx = Pick<AppContext, 'db' | 'mailbox' | 'config' | 'clock'>;

/** How far back (newest COUTMSGS rows) a request's row is looked for; requests time out in minutes. */
export const OUTBOUND_WINDOW = 5000;

/** What identifies a request's row in COUTMSGS: the sender it was written as, its type and its SEQN (= its ID). */
export const markerOf = (req: Pick<ReqRow, 'id' | 'kind' | 'sender'>): string[] => [
  `<SNDR>${req.sender}</SNDR>`,
  `<SEQN>${req.id}</SEQN>`,
  `<TYPE>${req.kind}</TYPE>`,
];

/**
 * Writes the request's row and confirms it. When the insert fails or its row cannot be confirmed,
 * the outcome is unknown: the row is then looked for by the request's marker (it may well be
 * there) rather than assumed absent. Returns the row's ID, or undefined when it is not found.
 */
export async function writeAndConfirm(
  ctx: Ctx,
  req: Pick<ReqRow, 'id' | 'kind' | 'scope' | 'sender' | 'receiver'>,
  at: Date,
): Promise<number | undefined> {
  try {
    const id = await ctx.mailbox.insertOutbound(encodeRequest(ctx, req, at));
    if (await ctx.mailbox.outboundExists(id)) return id;
  } catch {
    // Unknown whether it was written: reconciled below.
  }
  const found = await ctx.mailbox.findOutbound(markerOf(req), OUTBOUND_WINDOW).catch(() => undefined);
  if (found !== undefined) await appendAudit(ctx.db, req.id, { what: 'reconciled', outboundId: found, when: 'on send' }, ctx.clock.now());
  return found;
}

/**
 * Reconciles one REGISTERED request whose write was attempted but never confirmed (docs/flights.md "Requests"):
 * its row found in COUTMSGS → SENT with that row (the attempt's send time kept); not found →
 * 'absent', and only then may it be written again. Mailbox errors propagate: unknown stays unknown.
 */
export async function reconcileRequest(ctx: Ctx, req: ReqRow): Promise<'confirmed' | 'absent' | 'moved'> {
  const found = await ctx.mailbox.findOutbound(markerOf(req), OUTBOUND_WINDOW);
  const now = ctx.clock.now();
  if (found === undefined) return 'absent';
  return ctx.db.tx(async (tx) => {
    if (!(await markSent(tx, req.id, found, req.sent_at!))) return 'moved';
    await appendAudit(tx, req.id, { what: 'reconciled', outboundId: found, when: 'sweep' }, now);
    return 'confirmed';
  });
}

/**
 * The sweep's compensation pass: every unconfirmed request is looked for in COUTMSGS. Found → SENT.
 * Absent (the write never happened) → written again, with the same SEQN so that upstream can
 * recognise a duplicate, and a new send time (no answer can predate it). Never resent blindly.
 */
export async function reconcileRequests(ctx: Ctx): Promise<{ confirmed: number; resent: number }> {
  const out = { confirmed: 0, resent: 0 };
  if (ctx.config.shadow) return out;
  for (const req of await listUnconfirmed(ctx.db)) {
    const r = await reconcileRequest(ctx, req);
    if (r === 'confirmed') out.confirmed++;
    if (r !== 'absent') continue;
    const at = ctx.clock.now();
    await appendAudit(ctx.db, req.id, { what: 'reconcile-absent' }, at);
    if (!(await markSendAttempt(ctx.db, req.id, at))) continue;
    const id = await writeAndConfirm(ctx, req, at);
    if (id === undefined || !(await markSent(ctx.db, req.id, id, at))) continue;
    await appendAudit(ctx.db, req.id, { what: 'resent', outboundId: id }, ctx.clock.now());
    out.resent++;
  }
  return out;
}
