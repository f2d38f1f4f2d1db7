import { MalformedError } from '../shared/errors.ts';

/**
 * XML 1.0 references (section 4.1 of the spec): the five predefined entities and numeric character references are
 * the only ones a document without a DOCTYPE may use. Read by hand in one forward pass: no
 * pattern is ever run over user text, so the cost is linear in the text whatever it holds.
 */

const PREDEFINED: Readonly<Record<string, string>> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** XML 1.0 `Char`: what a character reference may name. */
export const isXmlChar = (cp: number): boolean =>
  cp === 0x9 ||
  cp === 0xa ||
  cp === 0xd ||
  (cp >= 0x20 && cp <= 0xd7ff) ||
  (cp >= 0xe000 && cp <= 0xfffd) ||
  (cp >= 0x10000 && cp <= 0x10ffff);

const isDigit = (c: number) => c >= 48 && c <= 57;
const hexValue = (c: number) => (isDigit(c) ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1);
// Entity names: ASCII letters, digits, '_', '-', '.', ':' and anything non-ASCII (XML's NameChar,
// loosely; an undeclared name is refused either way, so the exact set only shapes the message).
const isNameChar = (c: number) =>
  (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || isDigit(c) || c === 95 || c === 45 || c === 46 || c === 58 || c > 127;

/** A shown excerpt of a reference, bounded so a reason never carries a megabyte. */
const shown = (text: string, from: number, to: number) => (to - from > 24 ? `${text.slice(from, from + 20)}…` : text.slice(from, to));

/** The reference starting at `text[at] === '&'`: its replacement and where it ends (after ';'). */
export function readReference(text: string, at: number): { value: string; end: number } {
  let i = at + 1;
  if (text.charCodeAt(i) === 35 /* # */) {
    i++;
    const hex = text.charCodeAt(i) === 120; /* x */
    if (hex) i++;
    const start = i;
    let cp = 0;
    for (; ; i++) {
      const c = text.charCodeAt(i);
      const d = hex ? hexValue(c) : isDigit(c) ? c - 48 : -1;
      if (d < 0) break;
      // Saturate instead of overflowing: any value past U+10FFFF is refused below, however long.
      cp = Math.min(cp * (hex ? 16 : 10) + d, 0x110000);
    }
    if (i === start || text.charCodeAt(i) !== 59 /* ; */)
      throw new MalformedError(`not well-formed XML: "${shown(text, at, i + 1)}" is not a character reference (offset ${at})`);
    if (!isXmlChar(cp)) {
      const what =
        cp >= 0x110000
          ? 'is beyond U+10FFFF'
          : cp >= 0xd800 && cp <= 0xdfff
            ? 'is a surrogate'
            : `U+${cp.toString(16).toUpperCase().padStart(4, '0')} is not an XML character`;
      throw new MalformedError(`the character reference ${shown(text, at, i + 1)} is not allowed in XML: ${what} (offset ${at})`);
    }
    return { value: String.fromCodePoint(cp), end: i + 1 };
  }
  const start = i;
  while (i < text.length && isNameChar(text.charCodeAt(i))) i++;
  if (i === start || text.charCodeAt(i) !== 59)
    throw new MalformedError(`not well-formed XML: "&" must start a reference such as &amp; (offset ${at}: "${shown(text, at, i + 1)}")`);
  const name = text.slice(start, i);
  const value = Object.hasOwn(PREDEFINED, name) ? PREDEFINED[name] : undefined;
  if (value === undefined)
    throw new MalformedError(
      `the entity &${name.length > 20 ? `${name.slice(0, 20)}…` : name}; is not declared (only &amp; &lt; &gt; &quot; &apos; and character references are)`,
    );
  return { value, end: i + 1 };
}

/** Character data as XML means it: references replaced. Line ends are already normalised by the parser. */
export function decodeText(raw: string): string {
  let i = raw.indexOf('&');
  if (i === -1) return raw;
  let out = '';
  let last = 0;
  while (i !== -1) {
    const r = readReference(raw, i);
    out += raw.slice(last, i) + r.value;
    last = r.end;
    i = raw.indexOf('&', last);
  }
  return out + raw.slice(last);
}

/**
 * An attribute value as XML 1.0 (section 3.3.3) normalises it: a literal tab, CR or LF becomes a space (a
 * CR LF pair one space), references are replaced (a `&#10;` stays a line feed).
 */
export function decodeAttribute(raw: string): string {
  let out = '';
  let last = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === 38 /* & */) {
      const r = readReference(raw, i);
      out += raw.slice(last, i) + r.value;
      last = r.end;
      i = r.end - 1;
    } else if (c === 9 || c === 10 || c === 13) {
      out += `${raw.slice(last, i)} `;
      if (c === 13 && raw.charCodeAt(i + 1) === 10) i++;
      last = i + 1;
    }
  }
  return last === 0 ? raw : out + raw.slice(last);
}
