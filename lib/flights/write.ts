import type { FlightPatch } from '../codec/message.ts';
import type { NewEvent } from '../outbox/enqueue.ts';
import type { ProcessContext } from '../pipeline/processor.ts';
import { ProtocolError } from '../shared/errors.ts';
import { flightEvents } from './events.ts';
import { applyPatch, blankFlight, diffFlights, type FlightState } from './model.ts';
import { flightUnit } from './unit.ts';

/**
 * An operation on one flight.
 * - `put` (SCHD DNLD/RESP/ADFT): creates the flight or merges into it. With `stale` checking, a
 *   message older (by DTTM) than the flight's newest applied message leaves it untouched.
 * - `patch` (FLOP): merges into an existing, live flight.
 * - `delete` (FDEL): marks an existing flight DELETED (its content stays readable until the sweep).
 */
export type FlightOp =
  | { op: 'put'; patch: FlightPatch & { FLID: string; OPDY: string }; staleCheck: boolean }
  | { op: 'patch'; patch: FlightPatch & { FLID: string } }
  | { op: 'delete'; flid: string };

export type OpOutcome = 'created' | 'changed' | 'unchanged' | 'stale' | 'no-such-flight' | 'flight-deleted';

export interface ApplyResult {
  /** Per operation, in order. */
  outcomes: OpOutcome[];
  /** Flights whose state changed (one version bump and one event pair each). */
  changed: { flid: string; created: boolean; deleted: boolean; stateVersion: number }[];
}

/**
 * THE write entry point for flight state. Reads every flight the message touches in one query
 * under lock, computes the next states in memory, writes only the flights (and collections) that
 * changed in one statement, bumps state_version once per flight per message, and enqueues exactly
 * one msgx.msg event and one msgx.schd upsert or tombstone per changed flight.
 */
export async function applyFlightOps(ctx: ProcessContext, ops: FlightOp[]): Promise<ApplyResult> {
  const flids = [...new Set(ops.map((o) => (o.op === 'delete' ? o.flid : o.patch.FLID)))].sort();
  // In the pump, reads and writes go through the group's unit of work (one read and one write
  // per group); called on its own, a private unit is flushed before returning.
  const { unit, standalone } = flightUnit(ctx);
  const before = await unit.read(flids);
  const work = new Map(before);
  const sentAt = ctx.message.sentAt ?? null;
  const outcomes: OpOutcome[] = [];

  for (const o of ops) {
    const flid = o.op === 'delete' ? o.flid : o.patch.FLID;
    const cur = work.get(flid);
    if (o.op !== 'delete' && o.patch.OPDY !== undefined && cur && cur.operationDay !== o.patch.OPDY)
      throw new ProtocolError(`FLID ${flid} is bound to operation day ${cur.operationDay}, not ${o.patch.OPDY}`);
    if (o.op === 'put') {
      if (o.staleCheck && cur?.srcDttm && sentAt && sentAt < cur.srcDttm) {
        outcomes.push('stale');
        continue;
      }
      const base = !cur || cur.status === 'DELETED' ? blankFlight(flid, o.patch.OPDY, cur) : cur;
      work.set(flid, applyPatch(base, o.patch));
      outcomes.push(!cur || cur.status === 'DELETED' ? 'created' : 'changed');
    } else if (!cur) {
      outcomes.push('no-such-flight');
    } else if (cur.status === 'DELETED') {
      outcomes.push('flight-deleted');
    } else if (o.op === 'patch') {
      work.set(flid, applyPatch(cur, o.patch));
      outcomes.push('changed');
    } else {
      work.set(flid, { ...cur, status: 'DELETED' });
      outcomes.push('changed');
    }
  }

  const changed: ApplyResult['changed'] = [];
  for (const flid of flids) {
    const prev = before.get(flid);
    const draft = work.get(flid);
    if (!draft || draft === prev) continue;
    const diff = diffFlights(prev, draft);
    if (!diff.main && diff.kinds.length === 0) continue;
    const next: FlightState = {
      ...draft,
      // A flight new to the live tables continues from the version it had before a history sweep.
      stateVersion: (prev?.stateVersion ?? unit.versionFloor(flid)) + 1,
      lastMsgId: ctx.msgId,
      srcDttm: prev?.srcDttm && (!sentAt || prev.srcDttm > sentAt) ? prev.srcDttm : sentAt,
      createdAt: prev ? prev.createdAt : ctx.now,
      updatedAt: ctx.now,
    };
    // diff.kinds is against the stored state, so a flight brought back from DELETED also clears
    // the collections it no longer has.
    const created = !prev || (prev.status === 'DELETED' && next.status === 'ACTIVE');
    const deleted = next.status === 'DELETED';
    const events: NewEvent[] = flightEvents(ctx, next, { created, deleted, fields: diff.fields });
    unit.stage(next, diff.kinds, events);
    changed.push({ flid, created, deleted, stateVersion: next.stateVersion });
  }
  // Outcomes said 'changed' optimistically; correct those whose flight ended up unchanged.
  const changedSet = new Set(changed.map((c) => c.flid));
  ops.forEach((o, i) => {
    const flid = o.op === 'delete' ? o.flid : o.patch.FLID;
    if ((outcomes[i] === 'changed' || outcomes[i] === 'created') && !changedSet.has(flid)) outcomes[i] = 'unchanged';
  });

  if (standalone) await unit.flush();
  return { outcomes, changed };
}
