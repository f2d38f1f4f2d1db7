import type { Processor } from '../pipeline/processor.ts';
import { ProtocolError, UnsupportedError } from '../shared/errors.ts';
import { applyFlightOps } from './write.ts';

/**
 * FLOP subtypes msgx applies. The STYP names the change; the body carries FLID plus the changed
 * fields, applied by the same merge rules whatever the subtype. A subtype not listed here is
 * FAILED(UNSUPPORTED) (retried, replayable once supported), never malformed.
 */
export const FLOP_SUBTYPES: ReadonlySet<string> = new Set([
  'ETOT', 'ATOT', 'ELDT', 'ALDT', 'AIBT', 'AOBT', 'EOBT', 'EIBT', 'SOBT', 'SIBT',
  'GATE', 'STND', 'BELT', 'CHKC', 'BRDG', 'LNGE', 'DLAY', 'ROUT', 'CSFL',
  'CANX', 'DIVT', 'RETN', 'BORD', 'GTCL', 'STAT', 'ACTP', 'ACNO', 'TERM', 'UPDT',
]);

export const flopProcessor: Processor = async (ctx) => {
  const { message } = ctx;
  if (!FLOP_SUBTYPES.has(message.subtype)) throw new UnsupportedError(`FLOP subtype "${message.subtype}" is not supported`);
  if (message.payload.kind !== 'FLOP') throw new ProtocolError('FLOP message without a FLOP body');
  const flights = message.payload.flights;
  if (flights.length !== 1) throw new ProtocolError(`FLOP carries ${flights.length} flights, exactly 1 expected`);
  const patch = flights[0]!;
  if (!patch.FLID) throw new ProtocolError('FLOP/FLIGHT has no FLID');
  const { outcomes } = await applyFlightOps(ctx, [{ op: 'patch', patch: { ...patch, FLID: patch.FLID } }]);
  const o = outcomes[0]!;
  if (o === 'no-such-flight' || o === 'flight-deleted') return { status: 'SKIPPED', note: o };
  return o === 'unchanged' ? { status: 'SUCCEEDED', note: 'unchanged' } : { status: 'SUCCEEDED' };
};
