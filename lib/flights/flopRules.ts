import type { FlightPatch } from '../codec/message.ts';
import { isResourceKind, isScalar } from '../codec/vocabulary.ts';

/**
 * What a FLOP of each subtype must carry besides FLID: at least one of `anyOf` (a scalar or a
 * collection, present even if empty — an empty element clears). `anyOf: 'any'` accepts any field.
 * Other fields may come along (a CANX usually brings STAT too); all of them are merged alike.
 * The keys of this table are the subtypes msgx applies; any other STYP is UNSUPPORTED.
 */
export interface FlopRule {
  anyOf: readonly string[] | 'any';
}

const carries = (...names: string[]): FlopRule => ({ anyOf: names });

export const FLOP_RULES: Readonly<Record<string, FlopRule>> = {
  // Times
  ETOT: carries('ETOT'),
  ATOT: carries('ATOT'),
  ELDT: carries('ELDT'),
  ALDT: carries('ALDT'),
  AIBT: carries('AIBT'),
  AOBT: carries('AOBT'),
  EOBT: carries('EOBT'),
  EIBT: carries('EIBT'),
  SOBT: carries('SOBT'),
  SIBT: carries('SIBT'),
  BORD: carries('BORD'),
  GTCL: carries('GTCL'),
  // Resources
  GATE: carries('GATE'),
  STND: carries('STND'),
  BELT: carries('BELT'),
  CHKC: carries('CHKC'),
  BRDG: carries('BRDG'),
  LNGE: carries('LNGE'),
  DLAY: carries('DLAY'),
  CSFL: carries('CSFL'),
  // A route change may carry the planned route, the altered one (ERUT) or both.
  ROUT: carries('ROUT', 'ERUT'),
  // Status and aircraft
  CANX: carries('CANX'),
  DIVT: carries('DIVT'),
  RETN: carries('RETN'),
  STAT: carries('STAT'),
  ACTP: carries('ACTP'),
  ACNO: carries('ACNO'),
  TERM: carries('TERM'),
  // A general update: whatever changed, at least one field.
  UPDT: { anyOf: 'any' },
};

export const FLOP_SUBTYPES: ReadonlySet<string> = new Set(Object.keys(FLOP_RULES));

/** Why this patch does not fit its subtype, or undefined when it does. */
export function flopMismatch(styp: string, patch: FlightPatch): string | undefined {
  const rule = FLOP_RULES[styp];
  if (!rule) return undefined;
  const has = (name: string) =>
    (isScalar(name) && patch.scalars[name] !== undefined) || (isResourceKind(name) && patch.resources[name] !== undefined);
  if (rule.anyOf === 'any') {
    const any = Object.keys(patch.scalars).length + Object.keys(patch.resources).length + patch.extra.length + (patch.OPDY ? 1 : 0);
    return any > 0 ? undefined : `FLOP/${styp} carries no field besides FLID`;
  }
  if (rule.anyOf.some(has)) return undefined;
  return `FLOP/${styp} does not carry ${rule.anyOf.join(' or ')}`;
}
