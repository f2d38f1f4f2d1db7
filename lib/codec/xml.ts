import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { MAX_MESSAGE_BYTES } from '../constants.ts';
import { MalformedError } from '../shared/errors.ts';
import { decodeAttribute, decodeText } from './references.ts';
import { scanDocument } from './scan.ts';

/**
 * The XML layer of the codec: hostile-input limits, well-formedness, and an order-preserving tree.
 * Values are text as XML 1.0 means it (references replaced, no number coercion: SEQN 0042 stays
 * "0042").
 */

/**
 * An element as the codec keeps it: name and either its text ('' when empty) or its children in
 * order. Attributes are children too, named `@name`, ahead of the content in received order; an
 * element with attributes keeps its text as a `#text` child (`<X a="1">t</X>` →
 * `['X', [['@a', '1'], ['#text', 't']]]`). Neither '@' nor '#' can start an element name.
 */
export type XmlValue = string | XmlNode[];
export type XmlNode = [name: string, value: XmlValue];

export const ATTR_PREFIX = '@';
export const TEXT_NODE = '#text';

export interface XmlLimits {
  maxBytes: number;
  maxDepth: number;
  maxElements: number;
  maxAttributes: number;
}

export const DEFAULT_LIMITS: XmlLimits = { maxBytes: MAX_MESSAGE_BYTES, maxDepth: 32, maxElements: 200_000, maxAttributes: 1000 };

const parser = new XMLParser({
  preserveOrder: true, // unknown elements round-trip in their received order
  ignoreAttributes: false,
  // '@name' keys: a name like __proto__ never becomes a bare key of the parser's attribute object.
  attributeNamePrefix: ATTR_PREFIX,
  allowBooleanAttributes: false,
  // No entity expansion in the parser at all (billion-laughs cannot start): the five predefined
  // entities and character references are replaced by decodeText/decodeAttribute, after
  // scanDocument refused every other reference.
  processEntities: false,
  htmlEntities: false,
  cdataPropName: '#cdata', // CDATA is literal: kept apart so its '&amp;' is never decoded
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  maxNestedTags: 64, // a second guard behind scanDocument
  // Keep names like toString/valueOf as received (the parser would rename them "__toString"): with
  // preserveOrder each becomes an own key of a fresh one-key object, and nodesToJson reads own keys
  // only. The names that can pollute a prototype are refused before parsing (RESERVED_NAME).
  onDangerousProperty: (name: string) => name,
});

// Characters XML 1.0 forbids: C0 controls other than tab, LF and CR, lone surrogates and
// U+FFFE/U+FFFF. The parser would let them through; U+0000 cannot even be stored in PostgreSQL
// text. One character class, no quantifier: linear.
const ILLEGAL_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

// Element names that would become object keys with a meaning in JavaScript: refused before
// parsing (the ingress then refuses them too, instead of accepting a message that dies later).
const RESERVED_NAME = /<\/?(__proto__|constructor|prototype)[\s/>]/;

export const illegalCharReason = (ch: string) =>
  `the character U+${ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')} is not allowed in XML`;

/** Cheap checks that refuse hostile input before a parser ever sees it. */
export function precheck(text: string, limits: XmlLimits = DEFAULT_LIMITS): void {
  if (text.trim() === '') throw new MalformedError('empty message');
  if (Buffer.byteLength(text, 'utf8') > limits.maxBytes) throw new MalformedError(`message larger than ${limits.maxBytes} bytes`);
  if (/<!DOCTYPE/i.test(text)) throw new MalformedError('DOCTYPE is not allowed');
  if (/<!ENTITY/i.test(text)) throw new MalformedError('ENTITY declarations are not allowed');
  const illegal = ILLEGAL_CHAR.exec(text);
  if (illegal) throw new MalformedError(illegalCharReason(illegal[0]));
  const reserved = RESERVED_NAME.exec(text);
  if (reserved) throw new MalformedError(`the element name <${reserved[1]}> is reserved (a JavaScript keyword)`);
  scanDocument(text, limits);
}

/** Well-formedness only (the ingress uses it to refuse before storing anything). */
export function checkWellFormed(text: string, limits: XmlLimits = DEFAULT_LIMITS): void {
  precheck(text, limits);
  const v = XMLValidator.validate(text);
  if (v !== true) throw new MalformedError(`not well-formed XML: ${v.err.msg} (line ${v.err.line})`);
}

/** Parses a checked document into ordered nodes (the document's top-level elements). */
export function parseXml(text: string, limits: XmlLimits = DEFAULT_LIMITS): XmlNode[] {
  checkWellFormed(text, limits);
  let raw: unknown[];
  try {
    raw = parser.parse(text) as unknown[];
  } catch (err) {
    throw new MalformedError(`not well-formed XML: ${(err as Error).message}`);
  }
  return toNodes(raw);
}

function toNodes(raw: unknown[]): XmlNode[] {
  const out: XmlNode[] = [];
  for (const entry of raw) {
    if (!entry || typeof entry !== 'object') continue;
    for (const [name, children] of Object.entries(entry as Record<string, unknown>)) {
      if (name === ':@' || name === TEXT_NODE || name === '#cdata' || name.startsWith('?') || name === '#comment') continue;
      out.push([name, toValue(children as unknown[], (entry as Record<string, unknown>)[':@'] as Record<string, unknown> | undefined)]);
    }
  }
  return out;
}

function toValue(children: unknown[], rawAttrs: Record<string, unknown> | undefined): XmlValue {
  const attrs: XmlNode[] = rawAttrs ? Object.entries(rawAttrs).map(([k, v]) => [k, decodeAttribute(String(v))]) : [];
  const elements = Array.isArray(children) ? toNodes(children) : [];
  if (elements.length > 0) return [...attrs, ...elements]; // mixed text beside elements carries no meaning here
  let text = '';
  for (const c of Array.isArray(children) ? children : []) {
    const node = c as Record<string, unknown>;
    if (node[TEXT_NODE] !== undefined) text += decodeText(String(node[TEXT_NODE]));
    else if (Array.isArray(node['#cdata'])) for (const t of node['#cdata'] as Record<string, unknown>[]) text += String(t[TEXT_NODE] ?? '');
  }
  if (attrs.length === 0) return text;
  return text === '' ? attrs : [...attrs, [TEXT_NODE, text]];
}

/**
 * An element's text when it holds text (attributes aside): `<X a="1">t</X>` → 't'; undefined when
 * it holds child elements.
 */
export function textOf(v: XmlValue): string | undefined {
  if (typeof v === 'string') return v;
  let text = '';
  for (const [name, value] of v) {
    if (name === TEXT_NODE) text = value as string;
    else if (!name.startsWith(ATTR_PREFIX)) return undefined;
  }
  return text;
}

/** The element's attributes as `[name, value]` pairs without the '@' (none for plain text). */
export const attributesOf = (v: XmlValue): [string, string][] =>
  typeof v === 'string' ? [] : v.filter((n) => n[0].startsWith(ATTR_PREFIX)).map(([n, value]) => [n.slice(1), value as string]);

/** The element without its attributes: its text, or its child elements. */
export function contentOf(v: XmlValue): XmlValue {
  if (typeof v === 'string') return v;
  const text = textOf(v);
  return text !== undefined ? text : v.filter((n) => !n[0].startsWith(ATTR_PREFIX));
}

/** The first child element of that name, if any. */
export const child = (nodes: XmlNode[], name: string): XmlValue | undefined => nodes.find((n) => n[0] === name)?.[1];

/** Turns ordered nodes into plain JSON: text stays text, a name that repeats becomes an array. */
export function nodesToJson(nodes: XmlNode[]): Record<string, unknown> {
  const counts = new Map<string, number>();
  for (const [name] of nodes) counts.set(name, (counts.get(name) ?? 0) + 1);
  const out: Record<string, unknown> = {};
  for (const [name, value] of nodes) {
    const v = typeof value === 'string' ? value : nodesToJson(value);
    // Own keys only: a repeated <toString> must not find Object.prototype.toString here.
    if (counts.get(name)! > 1) (Object.hasOwn(out, name) ? (out[name] as unknown[]) : (out[name] = [])).push(v);
    else out[name] = v;
  }
  return out;
}
