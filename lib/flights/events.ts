import type { NewEvent } from '../outbox/enqueue.ts';
import type { ProcessContext } from '../pipeline/processor.ts';
import { flightJson } from './json.ts';
import type { FlightState } from './model.ts';

/** Event types on msgx.msg (docs/events.md is the consumers' contract). */
export const MSG_EVENT = {
  created: 'FLIGHT_CREATED',
  updated: 'FLIGHT_UPDATED',
  deleted: 'FLIGHT_DELETED',
  purged: 'FLIGHT_PURGED',
} as const;
/** Event types on msgx.schd (compacted: latest whole state per FLID, null on delete). */
export const SCHD_EVENT = { upsert: 'UPSERT', tombstone: 'TOMBSTONE' } as const;

/** The `v` of every event value: consumers branch on it when the shape changes (docs/events.md). */
const EVENT_VERSION = 1;

/** One msgx.msg event and one msgx.schd upsert or tombstone for a flight that changed. */
export function flightEvents(
  ctx: Pick<ProcessContext, 'msgId' | 'message'>,
  f: FlightState,
  change: { created: boolean; deleted: boolean; fields: string[] },
): NewEvent[] {
  const flight = flightJson(f);
  const type = change.deleted ? MSG_EVENT.deleted : change.created ? MSG_EVENT.created : MSG_EVENT.updated;
  const m = ctx.message;
  const common = { key: f.flid, flid: f.flid, stateVersion: f.stateVersion, sourceKind: 'proc' as const, sourceId: String(ctx.msgId) };
  return [
    {
      ...common,
      target: 'msg',
      type,
      value: {
        v: EVENT_VERSION,
        type,
        flid: f.flid,
        opdy: f.operationDay,
        stateVersion: f.stateVersion,
        changed: change.fields,
        source: { msgId: ctx.msgId, type: m.type, styp: m.subtype, identity: m.identity, dttm: m.meta.DTTM ?? null },
        flight,
      },
    },
    change.deleted
      ? { ...common, target: 'schd', type: SCHD_EVENT.tombstone, value: null }
      : { ...common, target: 'schd', type: SCHD_EVENT.upsert, value: { v: EVENT_VERSION, ...flight } },
  ];
}

/** The sweep removes a flight nobody deleted: consumers still get a final msg event and a tombstone. */
export function purgeEvents(f: FlightState, now: Date): NewEvent[] {
  const stateVersion = f.stateVersion + 1; // newer than anything pending, so the schd flush keeps the tombstone
  const common = {
    key: f.flid,
    flid: f.flid,
    stateVersion,
    sourceKind: 'external' as const,
    sourceId: `sweep:${f.flid}:${f.stateVersion}`,
  };
  return [
    {
      ...common,
      target: 'msg',
      type: MSG_EVENT.purged,
      value: {
        v: EVENT_VERSION,
        type: MSG_EVENT.purged,
        flid: f.flid,
        opdy: f.operationDay,
        stateVersion,
        purgedAt: now.toISOString(),
        lastState: flightJson(f),
      },
    },
    { ...common, target: 'schd', type: SCHD_EVENT.tombstone, value: null },
  ];
}
