import { CodecError, ProtocolError } from '../shared/errors.ts';
import { localTimeToDate } from '../shared/time.ts';
import type { FlightPatch, Item } from './message.ts';
import {
  ITEM_FIELDS,
  ITEM_TIMES,
  isResourceKind,
  isScalar,
  isTimeScalar,
  KNOWN_ATTRS,
  RESOURCE_KEY,
  type ResourceKind,
} from './vocabulary.ts';
import { ATTR_PREFIX, attributesOf, contentOf, textOf, type XmlNode, type XmlValue } from './xml.ts';

// Wire times: yyyyMMddHHmmss, also accepted shorter (yyyyMMddHHmm, yyyyMMdd), as lib/shared/time.ts reads them.
const TIME_TEXT = /^\d{8}(?:\d{4}(?:\d{2})?)?$/;
const DAY_TEXT = /^\d{8}$/;

/** Digits in the right places AND a real calendar time (no hour 24, no 31 November). */
function isWireTime(t: string): boolean {
  if (!TIME_TEXT.test(t)) return false;
  try {
    localTimeToDate(t, 'UTC');
    return true;
  } catch {
    return false;
  }
}

/** Maps one <FLIGHT> element; `where` names it in reasons (e.g. "SCHD/FLIGHT[3]"). */
export function decodeFlight(value: XmlValue, where: string): FlightPatch {
  const attrs: Record<string, [string, string][]> = {};
  const patch: FlightPatch = { scalars: {}, resources: {}, extra: [], attrs };
  const t = textOf(value);
  if (t !== undefined && t !== '') throw new CodecError(`${where} holds text instead of elements`);
  if (typeof value === 'string') return patch;
  // Attribute-only FLIGHT: its `@name` nodes fall through to `extra` below, like unknown children.
  const seen = new Set<string>();
  for (const [name, raw] of value) {
    let v = raw;
    if (name === 'FLID' || name === 'OPDY' || isScalar(name) || isResourceKind(name)) {
      // A known element twice leaves the intended value ambiguous: refuse rather than guess.
      if (seen.has(name)) throw new ProtocolError(`${where}/${name} appears more than once`);
      seen.add(name);
      attrs[name] = attributesOf(raw);
      v = contentOf(raw);
    }
    if (name === 'FLID' || name === 'OPDY') {
      patch[name] = text(v, `${where}/${name}`);
      if (name === 'OPDY' && !DAY_TEXT.test(patch.OPDY!)) throw new ProtocolError(`${where}/OPDY "${patch.OPDY}" is not yyyyMMdd`);
    } else if (isScalar(name)) {
      const t = text(v, `${where}/${name}`);
      if (isTimeScalar(name) && t !== '' && !isWireTime(t))
        throw new ProtocolError(`${where}/${name} "${t}" is not a valid yyyyMMddHHmmss time`);
      patch.scalars[name] = t;
    } else if (isResourceKind(name)) {
      patch.resources[name] = decodeItems(name, v, `${where}/${name}`);
    } else {
      patch.extra.push([name, v]);
    }
  }
  return patch;
}

function decodeItems(kind: ResourceKind, value: XmlValue, where: string): Item[] {
  if (typeof value === 'string') {
    if (value === '') return []; // an empty collection element clears the collection
    throw new CodecError(`${where} holds text instead of ITEM elements`);
  }
  const items: Item[] = [];
  const keys = new Set<string>();
  let i = 0;
  for (const [name, v] of value) {
    i++;
    if (name !== 'ITEM') throw new CodecError(`${where} holds <${name}>, only <ITEM> is mapped`);
    const at = `${where}/ITEM[${i}]`;
    const nodes = itemNodes(v);
    const parts = RESOURCE_KEY[kind].map((k) => {
      const part = nodes.find((n) => n[0] === k)?.[1];
      if (part === undefined || part === '') throw new ProtocolError(`${at} has no ${k}`);
      return text(part, `${at}/${k}`);
    });
    for (const [n, t] of nodes)
      if (ITEM_TIMES.has(n) && typeof t === 'string' && t !== '' && !isWireTime(t))
        throw new ProtocolError(`${at}/${n} "${t}" is not a valid yyyyMMddHHmmss time`);
    const key = parts.join('|');
    if (keys.has(key)) throw new ProtocolError(`${where} lists ${RESOURCE_KEY[kind].join('+')} ${parts.join('/')} twice`);
    keys.add(key);
    items.push({ key, nodes });
  }
  return items;
}

/**
 * An ITEM's children as kept: its own attributes (`@name`) first, the fields the model reads as
 * plain text, their attributes (if any) gathered in one KNOWN_ATTRS node at the end, the rest as received.
 */
function itemNodes(v: XmlValue): XmlNode[] {
  if (typeof v === 'string') return [];
  const known: XmlNode[] = [];
  const nodes = v.map((n): XmlNode => {
    if (!ITEM_FIELDS.has(n[0]) || typeof n[1] === 'string') return n;
    const attrs = attributesOf(n[1]);
    if (attrs.length) known.push([n[0], attrs.map(([a, t]) => [`${ATTR_PREFIX}${a}`, t])]);
    return [n[0], contentOf(n[1])];
  });
  return known.length ? [...nodes, [KNOWN_ATTRS, known]] : nodes;
}

export function text(v: XmlValue, where: string): string {
  const t = textOf(v);
  if (t === undefined) throw new CodecError(`${where} holds elements where text is expected`);
  return t;
}
