import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { MalformedError } from '../shared/errors.ts';

/**
 * The XML layer of the codec: hostile-input limits, well-formedness, and an order-preserving tree.
 * Values are kept as text exactly as received (no number coercion: SEQN 0042 stays "0042").
 */

/** An element as the codec keeps it: name and either its text ('' when empty) or its children in order. */
export type XmlValue = string | XmlNode[];
export type XmlNode = [name: string, value: XmlValue];

export interface XmlLimits {
  maxBytes: number;
  maxDepth: number;
  maxElements: number;
}

export const DEFAULT_LIMITS: XmlLimits = { maxBytes: 1024 * 1024, maxDepth: 32, maxElements: 200_000 };

const parser = new XMLParser({
  preserveOrder: true, // unknown elements round-trip in their received order
  ignoreAttributes: true,
  processEntities: false, // no entity expansion at all: billion-laughs cannot start
  htmlEntities: false,
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  maxNestedTags: 64, // a second guard behind scanLimits
  // Keep names like toString/valueOf as received (the parser would rename them "__toString"): with
  // preserveOrder each becomes an own key of a fresh one-key object, and nodesToJson reads own keys
  // only. The names that can pollute a prototype are refused before parsing (RESERVED_NAME).
  onDangerousProperty: (name: string) => name,
});

// Characters XML 1.0 forbids: C0 controls other than tab, LF and CR, and U+FFFE/U+FFFF. The
// parser would let them through; U+0000 cannot even be stored in PostgreSQL text.
const ILLEGAL_CHAR = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/;

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
  scanLimits(text, limits);
}

// Opening, closing and self-closing tags; comments and CDATA may make it over-count, which only
// makes the limit stricter, never looser.
const TAG = /<(\/?)[A-Za-z_][\w.:-]*(?:\s[^<>]*?)?(\/?)>/g;

/** Depth and element count in one linear pass, before any recursion-prone parsing. */
export function scanLimits(text: string, limits: XmlLimits): void {
  // A flood of elements is refused by a plain character count first (an upper bound: every
  // element opens with '<' not followed by '/'), an order of magnitude faster than the tag scan.
  let opens = 0;
  for (let i = text.indexOf('<'); i !== -1; i = text.indexOf('<', i + 1)) {
    if (text.charCodeAt(i + 1) !== 47 /* '/' */ && ++opens > limits.maxElements)
      throw new MalformedError(`more than ${limits.maxElements} elements`);
  }
  let depth = 0;
  let elements = 0;
  TAG.lastIndex = 0;
  for (let m = TAG.exec(text); m; m = TAG.exec(text)) {
    if (m[1]) {
      depth--;
      continue;
    }
    elements++;
    if (elements > limits.maxElements) throw new MalformedError(`more than ${limits.maxElements} elements`);
    if (!m[2]) {
      depth++;
      if (depth > limits.maxDepth) throw new MalformedError(`elements nested deeper than ${limits.maxDepth}`);
    }
  }
}

/** Well-formedness only (the ingress uses it to refuse before storing anything). */
export function checkWellFormed(text: string, limits: XmlLimits = DEFAULT_LIMITS): void {
  precheck(text, limits);
  const v = XMLValidator.validate(text);
  if (v !== true) throw new MalformedError(`not well-formed XML: ${v.err.msg} (line ${v.err.line})`);
  assertSingleRoot(text);
}

/**
 * A document has one root element: a second one at the top level (`<MSG>…</MSG><MSG/>`) is not
 * well-formed, although the validator lets it through. Runs on validated text, with comments and
 * CDATA (which may hold tag-like text) taken out first.
 */
function assertSingleRoot(text: string): void {
  const bare = text.replace(/<!--[\s\S]*?-->/g, '').replace(/<!\[CDATA\[[\s\S]*?\]\]>/g, '');
  let depth = 0;
  let roots = 0;
  TAG.lastIndex = 0;
  for (let m = TAG.exec(bare); m; m = TAG.exec(bare)) {
    if (m[1]) {
      depth--;
      continue;
    }
    if (depth === 0 && ++roots > 1) throw new MalformedError('not well-formed XML: more than one root element');
    if (!m[2]) depth++;
  }
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
      if (name === ':@' || name === '#text' || name.startsWith('?') || name === '#comment') continue;
      out.push([name, toValue(children as unknown[])]);
    }
  }
  return out;
}

function toValue(children: unknown[]): XmlValue {
  if (!Array.isArray(children) || children.length === 0) return '';
  const elements = toNodes(children);
  if (elements.length > 0) return elements; // mixed text beside elements carries no meaning here
  let text = '';
  for (const c of children) {
    const t = (c as Record<string, unknown>)['#text'];
    if (t !== undefined) text += String(t);
  }
  return text;
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
