import type { Processor } from '../pipeline/processor.ts';
import { ProtocolError, UnsupportedError } from '../shared/errors.ts';
import { FLOP_SUBTYPES, flopMismatch } from './flopRules.ts';
import { applyFlightOps } from './write.ts';

/**
 * FLOP: one flight's changed fields. The STYP names the change; FLOP_RULES (flopRules.ts) says what
 * its body must carry, and a body that does not carry it is refused as PROTOCOL (e.g. STYP=GATE
 * without GATE). A subtype not in the table is FAILED(UNSUPPORTED) (retried, replayable once
 * supported), never malformed. Every subtype then goes through the same merge rules.
 */
export const flopProcessor: Processor = async (ctx) => {
  const { message } = ctx;
  if (!FLOP_SUBTYPES.has(message.subtype)) throw new UnsupportedError(`FLOP subtype "${message.subtype}" is not supported`);
  if (message.payload.kind !== 'FLOP') throw new ProtocolError('FLOP message without a FLOP body');
  const flights = message.payload.flights;
  if (flights.length !== 1) throw new ProtocolError(`FLOP carries ${flights.length} flights, exactly 1 expected`);
  const patch = flights[0]!;
  if (!patch.FLID) throw new ProtocolError('FLOP/FLIGHT has no FLID');
  const mismatch = flopMismatch(message.subtype, patch);
  if (mismatch) throw new ProtocolError(mismatch);
  const { outcomes } = await applyFlightOps(ctx, [{ op: 'patch', patch: { ...patch, FLID: patch.FLID } }]);
  const o = outcomes[0]!;
  if (o === 'no-such-flight' || o === 'flight-deleted') return { status: 'SKIPPED', note: o };
  return o === 'unchanged' ? { status: 'SUCCEEDED', note: 'unchanged' } : { status: 'SUCCEEDED' };
};
