import type { Queryable } from '../db/db.ts';
import { type ReqKind, type ReqRow, closeRequest, lockOpenRequest } from './track.ts';

export type MatchResult = { ok: true; request: ReqRow } | { ok: false; reason: string };

/**
 * Does an answer belong to our open request? It must match the open request of its kind and scope,
 * that request must be confirmed SENT and not timed out, and the answer's DTTM must not be older
 * than the send time. Both sides are instants (DTTM read in the airport zone) compared in whole
 * seconds, the unit of DTTM: an answer stamped in the very second we sent is not "older".
 */
export async function matchAnswer(
  q: Queryable,
  args: { kind: ReqKind; scope: string | undefined; answerAt: Date | undefined; now: Date; timeoutMs: number },
): Promise<MatchResult> {
  const req = await lockOpenRequest(q, args.kind);
  if (!req) return { ok: false, reason: 'no-open-request' };
  if (req.status !== 'SENT' || !req.sent_at) return { ok: false, reason: `request-not-sent:${req.id}` };
  if (args.scope !== undefined && req.scope !== args.scope) return { ok: false, reason: `request-scope-mismatch:${req.id}:${req.scope}` };
  if (args.now.getTime() - req.sent_at.getTime() >= args.timeoutMs) {
    // The timeout sweep has not run yet; the request is over all the same.
    await closeRequest(q, req.id, 'EXPIRED', 'timeout', args.now);
    return { ok: false, reason: `request-expired:${req.id}` };
  }
  if (!args.answerAt) return { ok: false, reason: 'answer-without-dttm' };
  const sentSecond = Math.floor(req.sent_at.getTime() / 1000) * 1000;
  if (args.answerAt.getTime() < sentSecond) return { ok: false, reason: `answer-older-than-request:${req.id}` };
  return { ok: true, request: req };
}
