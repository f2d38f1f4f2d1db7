import type { Queryable } from '../db/db.ts';
import { NotReadyError } from '../shared/errors.ts';
import { appendAudit, closeRequest, lockOpenRequest, lockRequest, markSent, type ReqKind, type ReqRow } from './track.ts';

export type MatchResult = { ok: true; request: ReqRow } | { ok: false; reason: string };

export interface AnswerFacts {
  kind: ReqKind;
  scope: string | undefined;
  /** The answer's DTTM as an instant. */
  answerAt: Date | undefined;
  /** Our request's SEQN (its ID) when the answer echoes it (`SCHD/RQSN`). */
  echo: string | undefined;
  msgId: number;
  now: Date;
  timeoutMs: number;
}

/** The rule the fallback uses, written into the audit of every request it matched. */
export const FALLBACK_RULE = 'same kind, open, DTTM >= sentAt';

/**
 * Does an answer belong to our request (docs/flights.md "Requests")? An answer that echoes our request's SEQN
 * is matched exactly to that request — and proves upstream read it, so an unconfirmed write
 * counts as sent. Without an echo the fallback applies: the open request of the kind, confirmed
 * SENT, of the same scope, not timed out, and the answer's DTTM not older than the send time; it
 * can pair an answer with the wrong generation of request, so every such match is recorded in the
 * request's audit. Both times are instants compared in whole seconds, the unit of DTTM.
 */
export async function matchAnswer(q: Queryable, a: AnswerFacts): Promise<MatchResult> {
  if (a.echo !== undefined) return matchEcho(q, a, a.echo);
  const req = await lockOpenRequest(q, a.kind);
  if (!req) return { ok: false, reason: 'no-open-request' };
  if (req.status !== 'SENT' && req.sent_at) {
    // Maybe written, not confirmed: the reconciliation against COUTMSGS decides, the answer waits
    // for it rather than being skipped as an answer to nothing. Waiting is not the answer's fault
    // (COUTMSGS may be unreachable for a while), so it spends no attempt; the request's timeout
    // bounds it.
    const expired = await expireIfOverdue(q, a, req);
    if (expired) return expired;
    throw new NotReadyError(`request ${req.id} is not confirmed yet: waiting for its reconciliation against COUTMSGS`);
  }
  if (req.status !== 'SENT' || !req.sent_at) return { ok: false, reason: `request-not-sent:${req.id}` };
  const common = await checkOpen(q, a, req);
  if (common) return common;
  const sentSecond = Math.floor(req.sent_at.getTime() / 1000) * 1000;
  if (a.answerAt!.getTime() < sentSecond) return { ok: false, reason: `answer-older-than-request:${req.id}` };
  await appendAudit(
    q,
    req.id,
    { what: 'answer-matched', method: 'fallback', rule: FALLBACK_RULE, msgId: a.msgId, answerAt: a.answerAt!.toISOString() },
    a.now,
  );
  return { ok: true, request: req };
}

async function matchEcho(q: Queryable, a: AnswerFacts, echo: string): Promise<MatchResult> {
  const id = /^\d{1,15}$/.test(echo) ? Number(echo) : undefined;
  const req = id === undefined ? undefined : await lockRequest(q, id);
  if (!req || req.kind !== a.kind) return { ok: false, reason: `unknown-request:${echo}` };
  if (req.status === 'DONE' || req.status === 'EXPIRED') return { ok: false, reason: `request-closed:${req.id}:${req.status}` };
  if (req.status === 'REGISTERED') {
    if (!req.sent_at) return { ok: false, reason: `request-not-sent:${req.id}` };
    // Upstream answered it, so it read our row: the write happened.
    await markSent(q, req.id, req.outbound_id, req.sent_at);
    await appendAudit(q, req.id, { what: 'confirmed-by-answer', msgId: a.msgId }, a.now);
    req.status = 'SENT';
  }
  const common = await checkOpen(q, a, req);
  if (common) return common;
  await appendAudit(q, req.id, { what: 'answer-matched', method: 'echo', msgId: a.msgId }, a.now);
  return { ok: true, request: req };
}

/** Scope, timeout and DTTM presence, alike for both ways of matching. */
async function checkOpen(q: Queryable, a: AnswerFacts, req: ReqRow): Promise<MatchResult | undefined> {
  if (a.scope !== undefined && req.scope !== a.scope) return { ok: false, reason: `request-scope-mismatch:${req.id}:${req.scope}` };
  const expired = await expireIfOverdue(q, a, req);
  if (expired) return expired;
  if (!a.answerAt) return { ok: false, reason: 'answer-without-dttm' };
  return undefined;
}

async function expireIfOverdue(q: Queryable, a: AnswerFacts, req: ReqRow): Promise<MatchResult | undefined> {
  if (a.now.getTime() - req.sent_at!.getTime() < a.timeoutMs) return undefined;
  // The timeout sweep has not run yet; the request is over all the same.
  await closeRequest(q, req.id, 'EXPIRED', 'timeout', a.now);
  return { ok: false, reason: `request-expired:${req.id}` };
}
