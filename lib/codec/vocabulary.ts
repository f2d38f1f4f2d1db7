/**
 * The flight elements the model knows. Anything else inside a FLIGHT or an ITEM is kept verbatim
 * (see FlightPatch.extra / Item.nodes) and round-trips into events and the read API.
 */

/** Scalars holding airport local times `yyyyMMddHHmmss`; also stored as timestamptz. */
export const TIME_SCALARS = ['SOBT', 'SIBT', 'EOBT', 'EIBT', 'ETOT', 'ATOT', 'ELDT', 'ALDT', 'AIBT', 'AOBT', 'BORD', 'GTCL'] as const;

/** Every known scalar in the order the read API and events list them (after FLID, OPDY). */
export const SCALARS = [
  'AWCD',
  'FLNO',
  'FLTK',
  'ADID',
  'ACTP',
  'ACNO',
  'TERM',
  'STAT',
  'SOBT',
  'SIBT',
  'EOBT',
  'EIBT',
  'ETOT',
  'ATOT',
  'ELDT',
  'ALDT',
  'AIBT',
  'AOBT',
  'BORD',
  'GTCL',
  'CANX',
  'DIVT',
  'RETN',
] as const;
export type ScalarName = (typeof SCALARS)[number];

/** ROUT is the planned route, ERUT the altered one: two collections, legs keyed by SEQ in each. */
export const RESOURCE_KINDS = ['ROUT', 'ERUT', 'CSFL', 'GATE', 'STND', 'BELT', 'CHKC', 'BRDG', 'LNGE', 'DLAY'] as const;
export type ResourceKind = (typeof RESOURCE_KINDS)[number];

/** Natural key of an item within its flight: route legs by SEQ, code shares by AWCD+FLNO, the rest by CODE. */
export const RESOURCE_KEY: Record<ResourceKind, readonly string[]> = {
  ROUT: ['SEQ'],
  ERUT: ['SEQ'],
  CSFL: ['AWCD', 'FLNO'],
  GATE: ['CODE'],
  STND: ['CODE'],
  BELT: ['CODE'],
  CHKC: ['CODE'],
  BRDG: ['CODE'],
  LNGE: ['CODE'],
  DLAY: ['CODE'],
};

/** Item children that are times (validated, and stored as timestamptz beside their text). */
export const ITEM_TIMES = new Set(['BEG', 'END']);

/** Item children the model reads (keys and typed columns); any other child is kept as received. */
export const ITEM_FIELDS: ReadonlySet<string> = new Set(['CODE', 'BEG', 'END', 'SEQ', 'APCD', 'AWCD', 'FLNO', 'MIN']);

/**
 * Where the attributes of known elements live: one node of this name on the FLIGHT (or the ITEM)
 * maps each known element that carried attributes to them, so known fields keep their JSON shape
 * (`"ETOT": "…"`, `"GATE": […]`) and their attributes are still kept (`"@": {"ETOT": {"@src": "A"}}`).
 */
export const KNOWN_ATTRS = '@';

const timeSet = new Set<string>(TIME_SCALARS);
const scalarSet = new Set<string>(SCALARS);
const kindSet = new Set<string>(RESOURCE_KINDS);
export const isTimeScalar = (name: string): boolean => timeSet.has(name);
export const isScalar = (name: string): name is ScalarName => scalarSet.has(name);
export const isResourceKind = (name: string): name is ResourceKind => kindSet.has(name);
