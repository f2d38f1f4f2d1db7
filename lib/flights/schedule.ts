import type { FlightPatch, SchdPayload } from '../codec/message.ts';
import { succeededWithIdentity } from '../pipeline/procState.ts';
import type { ProcessOutcome, Processor } from '../pipeline/processor.ts';
import { matchAnswer } from '../requests/match.ts';
import { closeRequest } from '../requests/track.ts';
import { ProtocolError } from '../shared/errors.ts';
import { logSnapshot } from './snapLog.ts';
import { applyFlightOps, type FlightOp } from './write.ts';

const DAY = /^\d{8}$/;

/**
 * Whole-package validation, before anything is read or written: the declared count, the package
 * day, every flight's FLID and day, no FLID twice. The FLID-bound-to-another-day rule needs the
 * stored state and is checked by the write entry point (a ProtocolError there rolls back all).
 */
export function validatePackage(p: SchdPayload, styp: string): (FlightPatch & { FLID: string; OPDY: string })[] {
  const adft = styp === 'ADFT';
  if (adft && p.flights.length !== 1) throw new ProtocolError(`SCHD/ADFT carries ${p.flights.length} flights, exactly 1 expected`);
  if (!adft && p.CNT === undefined) throw new ProtocolError(`SCHD/${styp} has no CNT`);
  if (p.CNT !== undefined) {
    if (!/^\d+$/.test(p.CNT)) throw new ProtocolError(`SCHD/CNT "${p.CNT}" is not a count`);
    if (Number(p.CNT) !== p.flights.length)
      throw new ProtocolError(`SCHD/CNT declares ${Number(p.CNT)} flights, ${p.flights.length} present`);
  }
  if (p.OPDY !== undefined && !DAY.test(p.OPDY)) throw new ProtocolError(`SCHD/OPDY "${p.OPDY}" is not yyyyMMdd`);
  if (!adft && p.OPDY === undefined) throw new ProtocolError(`SCHD/${styp} has no OPDY`);
  const seen = new Set<string>();
  return p.flights.map((f, i) => {
    const at = `SCHD/FLIGHT[${i + 1}]`;
    if (!f.FLID) throw new ProtocolError(`${at} has no FLID`);
    if (seen.has(f.FLID)) throw new ProtocolError(`${at}: FLID ${f.FLID} appears twice in the package`);
    seen.add(f.FLID);
    const day = f.OPDY ?? p.OPDY;
    if (!day) throw new ProtocolError(`${at} (FLID ${f.FLID}) has no OPDY`);
    if (p.OPDY !== undefined && day !== p.OPDY)
      throw new ProtocolError(`${at}: FLID ${f.FLID} is of operation day ${day}, the package of ${p.OPDY}`);
    return { ...f, FLID: f.FLID, OPDY: day };
  });
}

/** SCHD DNLD (day plan), RESP (answer to our RQFD) and ADFT (one added flight). */
export const scheduleProcessor: Processor = async (ctx): Promise<ProcessOutcome> => {
  const { message } = ctx;
  const styp = message.subtype;
  if (message.payload.kind !== 'SCHD') throw new ProtocolError('SCHD message without a SCHD body');
  const flights = validatePackage(message.payload, styp);

  // A replayed snapshot must not re-apply: it could roll back changes made since.
  const earlier = await succeededWithIdentity(ctx.tx, ctx.message.identity, ctx.msgId);
  if (earlier !== undefined) return { status: 'SKIPPED', note: `duplicate-of:${earlier}` };

  let requestId: number | null = null;
  if (styp === 'RESP') {
    const m = await matchAnswer(ctx.tx, {
      kind: 'RQFD',
      scope: message.payload.OPDY,
      answerAt: message.sentAt,
      echo: message.payload.RQSN,
      msgId: ctx.msgId,
      now: ctx.now,
      timeoutMs: ctx.config.lifecycle.requestTimeoutMs,
    });
    if (!m.ok) return { status: 'SKIPPED', note: m.reason };
    requestId = m.request.id;
  }

  const ops: FlightOp[] = flights.map((patch) => ({ op: 'put', patch, staleCheck: true }));
  const result = await applyFlightOps(ctx, ops);
  const count = (o: string) => result.outcomes.filter((x) => x === o).length;
  const counts = { created: count('created'), updated: count('changed'), unchanged: count('unchanged'), stale: count('stale') };

  if (styp !== 'ADFT') {
    await logSnapshot(ctx.tx, {
      msgId: ctx.msgId,
      styp,
      scope: message.payload.OPDY ?? null,
      dttm: message.sentAt ?? null,
      receivedAt: ctx.now,
      declared: message.payload.CNT === undefined ? null : Number(message.payload.CNT),
      flights: flights.length,
      ...counts,
      requestId,
    });
  }
  // The request is done only once its answer is applied: both commit together or not at all.
  if (requestId !== null) await closeRequest(ctx.tx, requestId, 'DONE', 'answered', ctx.now, ctx.msgId);
  // A snapshot that changes nothing (the same content again under a new SEQN, or all of it older
  // than the state) is an idempotent success with a trace (docs/flights.md "Messages"), never SKIPPED.
  if (counts.created + counts.updated === 0)
    return { status: 'SUCCEEDED', note: `no change: unchanged=${counts.unchanged} stale=${counts.stale}` };
  return {
    status: 'SUCCEEDED',
    note: `created=${counts.created} updated=${counts.updated} unchanged=${counts.unchanged} stale=${counts.stale}`,
  };
};
