import type { FlightPatch, Item } from '../codec/message.ts';
import { KNOWN_ATTRS, RESOURCE_KINDS, type ResourceKind, type ScalarName, SCALARS } from '../codec/vocabulary.ts';
import { ATTR_PREFIX, type XmlNode } from '../codec/xml.ts';

export type FlightStatus = 'ACTIVE' | 'DELETED';

/** The authoritative state of one flight, as flight_schd and its detail tables hold it. */
export interface FlightState {
  flid: string;
  operationDay: string;
  /** Known scalars as received; absent = never received, '' = received empty. */
  scalars: Partial<Record<ScalarName, string>>;
  resources: Record<ResourceKind, Item[]>;
  /** Unknown FLIGHT children, verbatim and in order. */
  extra: XmlNode[];
  status: FlightStatus;
  stateVersion: number;
  lastMsgId: number | null;
  /** DTTM of the newest message applied to the flight. */
  srcDttm: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What changed between two states: drives which rows are written and what events say. */
export interface FlightDiff {
  /** Wire names of the changed parts (scalars, resource kinds, unknown elements, OPDY, status). */
  fields: string[];
  /** The main row must be written (any scalar, extra, status or a new flight). */
  main: boolean;
  kinds: ResourceKind[];
}

export const emptyResources = (): Record<ResourceKind, Item[]> =>
  Object.fromEntries(RESOURCE_KINDS.map((k) => [k, [] as Item[]])) as Record<ResourceKind, Item[]>;

/** A flight that did not exist (or was deleted): the patch starts from nothing. */
export function blankFlight(flid: string, operationDay: string, previous?: FlightState): FlightState {
  return {
    flid,
    operationDay,
    scalars: {},
    resources: emptyResources(),
    extra: [],
    status: 'ACTIVE',
    // A deleted flight that comes back keeps counting, so consumers never see a version go down.
    stateVersion: previous?.stateVersion ?? 0,
    lastMsgId: previous?.lastMsgId ?? null,
    srcDttm: previous?.srcDttm ?? null,
    createdAt: previous?.createdAt ?? new Date(0),
    updatedAt: previous?.updatedAt ?? new Date(0),
  };
}

/**
 * Applies a patch: scalars present are set ('' included), a collection present replaces the
 * stored one, unknown elements present replace the same-named ones in place. Pure: returns a new state.
 */
export function applyPatch(cur: FlightState, patch: FlightPatch): FlightState {
  const next: FlightState = {
    ...cur,
    scalars: { ...cur.scalars },
    resources: { ...cur.resources },
    extra: cur.extra,
    status: 'ACTIVE',
  };
  for (const [name, value] of Object.entries(patch.scalars)) next.scalars[name as ScalarName] = value;
  for (const [kind, items] of Object.entries(patch.resources)) next.resources[kind as ResourceKind] = items!;
  if (patch.extra.length) next.extra = mergeExtra(cur.extra, patch.extra);
  if (patch.attrs && Object.keys(patch.attrs).length) next.extra = mergeKnownAttrs(next.extra, patch.attrs);
  return next;
}

/**
 * The attributes of known elements, kept in one KNOWN_ATTRS node of `extra`
 * (`['@', [['ETOT', [['@src', 'A']]]]]`): an element present in the patch replaces its entry, and
 * one present without attributes removes it; the node goes when it is empty.
 */
function mergeKnownAttrs(extra: XmlNode[], attrs: Record<string, [string, string][]>): XmlNode[] {
  const at = extra.findIndex((n) => n[0] === KNOWN_ATTRS);
  const cur = at === -1 || typeof extra[at]![1] === 'string' ? [] : extra[at]![1];
  const entry = (name: string): XmlNode[] =>
    attrs[name]!.length ? [[name, attrs[name]!.map(([a, v]): XmlNode => [`${ATTR_PREFIX}${a}`, v])]] : [];
  const entries = cur.flatMap((n) => (Object.hasOwn(attrs, n[0]) ? entry(n[0]) : [n]));
  for (const name of Object.keys(attrs)) if (!cur.some((n) => n[0] === name)) entries.push(...entry(name));
  if (at === -1) return entries.length ? [...extra, [KNOWN_ATTRS, entries]] : extra;
  // In place, so an unchanged entry leaves `extra` equal (no version bump for nothing).
  return entries.length ? extra.map((n, i) => (i === at ? [KNOWN_ATTRS, entries] : n)) : extra.filter((_, i) => i !== at);
}

function mergeExtra(cur: XmlNode[], incoming: XmlNode[]): XmlNode[] {
  const names = new Set(incoming.map((n) => n[0]));
  const placed = new Set<string>();
  const out: XmlNode[] = [];
  for (const node of cur) {
    if (!names.has(node[0])) out.push(node);
    else if (!placed.has(node[0])) {
      placed.add(node[0]);
      out.push(...incoming.filter((n) => n[0] === node[0]));
    }
  }
  for (const node of incoming) if (!placed.has(node[0])) out.push(node);
  return out;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Content differences only (versions, message IDs and timestamps are bookkeeping). */
export function diffFlights(cur: FlightState | undefined, next: FlightState): FlightDiff {
  const fields: string[] = [];
  const kinds: ResourceKind[] = [];
  if (!cur) {
    for (const k of RESOURCE_KINDS) if (next.resources[k].length) kinds.push(k);
    return { fields: ['FLID'], main: true, kinds };
  }
  if (cur.status !== next.status) fields.push('status');
  if (cur.operationDay !== next.operationDay) fields.push('OPDY');
  for (const s of SCALARS) if (cur.scalars[s] !== next.scalars[s]) fields.push(s);
  const extraChanged = !same(cur.extra, next.extra);
  if (extraChanged) {
    const names = new Set([...cur.extra, ...next.extra].map((n) => n[0]));
    for (const n of names)
      if (
        !same(
          cur.extra.filter((x) => x[0] === n),
          next.extra.filter((x) => x[0] === n),
        )
      )
        fields.push(n);
  }
  const main = fields.length > 0 || extraChanged;
  for (const k of RESOURCE_KINDS) {
    if (!same(cur.resources[k], next.resources[k])) {
      kinds.push(k);
      fields.push(k);
    }
  }
  return { fields, main, kinds };
}
