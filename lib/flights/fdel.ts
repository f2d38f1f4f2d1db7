import type { Processor } from '../pipeline/processor.ts';
import { ProtocolError } from '../shared/errors.ts';
import { applyFlightOps } from './write.ts';

/** FDEL: the flight becomes DELETED (readable until the history sweep) and gets a tombstone on msgx.schd. */
export const fdelProcessor: Processor = async (ctx) => {
  const { message } = ctx;
  if (message.payload.kind !== 'FDEL') throw new ProtocolError('FDEL message without an FDEL body');
  const flids = message.payload.flids;
  if (flids.length === 0) throw new ProtocolError('FDEL carries no FLIGHT');
  const { outcomes } = await applyFlightOps(
    ctx,
    flids.map((flid) => ({ op: 'delete' as const, flid })),
  );
  if (outcomes.every((o) => o === 'no-such-flight')) return { status: 'SKIPPED', note: 'no-such-flight' };
  if (outcomes.some((o) => o === 'changed')) return { status: 'SUCCEEDED' };
  return { status: 'SUCCEEDED', note: 'already-deleted' };
};
