import { RESOURCE_KINDS, SCALARS } from '../codec/vocabulary.ts';
import { nodesToJson } from '../codec/xml.ts';
import type { FlightState } from './model.ts';

/**
 * The flight as consumers see it (read API and msgx.schd values): wire element names, values as
 * text exactly as received, collections as arrays of items, unknown elements after the known ones.
 */
export function flightJson(f: FlightState): Record<string, unknown> {
  const out: Record<string, unknown> = { FLID: f.flid, OPDY: f.operationDay };
  for (const s of SCALARS) if (f.scalars[s] !== undefined) out[s] = f.scalars[s];
  for (const k of RESOURCE_KINDS) out[k] = f.resources[k].map((item) => nodesToJson(item.nodes));
  // Own keys only: an unknown element named like an Object.prototype member (toString, valueOf)
  // is still the flight's and must be shown.
  Object.assign(out, nodesToJson(f.extra.filter((n) => !Object.hasOwn(out, n[0]))));
  out.stateVersion = f.stateVersion;
  out.status = f.status;
  out.updatedAt = f.updatedAt.toISOString();
  return out;
}
