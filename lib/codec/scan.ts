import { MalformedError } from '../shared/errors.ts';
import { readReference } from './references.ts';

export interface ScanLimits {
  maxDepth: number;
  maxElements: number;
  maxAttributes: number;
}

/**
 * One forward pass over the document, before any parser sees it: element count, nesting depth,
 * attributes per element, a single root, and the XML 1.0 rules the validator does not enforce (references must be
 * predefined or legal character references, no `]]>` in character data, no `--` inside a comment,
 * no markup declarations). Hand-written on purpose: every index only moves forward (comments,
 * CDATA and processing instructions are skipped with indexOf from where they start), so the cost
 * is linear in the text whatever shape it has; no regular expression ever runs over it.
 */
export function scanDocument(text: string, limits: ScanLimits): void {
  countStartTags(text, limits);
  const n = text.length;
  // The next '&' and ']]>' at or after a position, found once and reused until passed: a search
  // per text segment would scan ahead to the same far occurrence again and again (quadratic).
  const amp = new NextIndex(text, '&');
  const cdataEnd = new NextIndex(text, ']]>');
  let depth = 0;
  let elements = 0;
  let roots = 0;
  let pos = 0;
  while (pos < n) {
    const lt = text.indexOf('<', pos);
    const textEnd = lt === -1 ? n : lt;
    if (textEnd > pos) checkCharData(text, pos, textEnd, amp, cdataEnd);
    if (lt === -1) break;
    const c1 = text.charCodeAt(lt + 1);
    if (c1 === 33 /* ! */) {
      pos = skipBang(text, lt);
    } else if (c1 === 63 /* ? */) {
      const end = text.indexOf('?>', lt + 2);
      if (end === -1) throw new MalformedError(`not well-formed XML: a processing instruction is never closed (offset ${lt})`);
      pos = end + 2;
    } else if (c1 === 47 /* / */) {
      const end = text.indexOf('>', lt + 2);
      if (end === -1) throw new MalformedError(`not well-formed XML: an end tag is never closed (offset ${lt})`);
      depth--;
      pos = end + 1;
    } else {
      if (lt + 1 >= n || isSpaceOrMarkup(c1)) throw new MalformedError(`not well-formed XML: "<" does not start a tag (offset ${lt})`);
      const { end, selfClosing } = readStartTag(text, lt, limits.maxAttributes);
      if (++elements > limits.maxElements) throw new MalformedError(`more than ${limits.maxElements} elements`);
      if (depth === 0 && ++roots > 1) throw new MalformedError('not well-formed XML: more than one root element');
      if (!selfClosing && ++depth > limits.maxDepth) throw new MalformedError(`elements nested deeper than ${limits.maxDepth}`);
      pos = end + 1;
    }
  }
}

/**
 * The element limit first, by a run of indexOf over the tags alone: an element flood is refused
 * without the full pass's work on every tag (086-too-many-elements, 200,001 elements: ~4 ms
 * against ~13 ms). It counts a `<` followed by a name's first character, jumps over comments,
 * CDATA and processing instructions from where the full pass looks for their ends, and follows the
 * depth, so what it counts is an element to the full pass or makes that pass refuse the document.
 * Anything else (an unclosed construct, a declaration, too deep first) it leaves to the full pass,
 * which names that reason; a flood that is also malformed elsewhere is refused for the flood.
 */
function countStartTags(text: string, limits: ScanLimits): void {
  let count = 0;
  let depth = 0;
  for (let lt = text.indexOf('<'); lt !== -1; lt = text.indexOf('<', lt + 1)) {
    const c = text.charCodeAt(lt + 1);
    if (c === 47 /* / */) {
      depth--;
      continue;
    }
    if (c === 33 /* ! */ || c === 63 /* ? */) {
      const [close, from] =
        c === 63 ? ['?>', 2] : text.startsWith('<!--', lt) ? ['-->', 4] : text.startsWith('<![CDATA[', lt) ? [']]>', 9] : [null, 0];
      const end = close === null ? -1 : text.indexOf(close, lt + from);
      if (end === -1) return;
      lt = end;
      continue;
    }
    if (!isNameStart(c)) return;
    const gt = text.indexOf('>', lt + 1);
    if (gt === -1) return;
    if (text.charCodeAt(gt - 1) !== 47 /* / */ && ++depth > limits.maxDepth) return;
    if (++count > limits.maxElements) throw new MalformedError(`more than ${limits.maxElements} elements`);
    lt = gt;
  }
}

const isNameStart = (c: number) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 58 || c > 127;

const isSpaceOrMarkup = (c: number) => c === 32 || c === 9 || c === 10 || c === 13 || c === 60 || c === 62;

class NextIndex {
  #at = -2;
  constructor(
    private readonly text: string,
    private readonly needle: string,
  ) {}

  /** The first occurrence at or after `from`, or -1. */
  from(from: number): number {
    if (this.#at !== -1 && this.#at < from) this.#at = this.text.indexOf(this.needle, from);
    return this.#at;
  }
}

function checkCharData(text: string, from: number, to: number, amp: NextIndex, cdataEnd: NextIndex): void {
  const end = cdataEnd.from(from);
  if (end !== -1 && end + 3 <= to)
    throw new MalformedError(`not well-formed XML: "]]>" is not allowed in text (offset ${end}; write ]]&gt;)`);
  for (let i = amp.from(from); i !== -1 && i < to; i = amp.from(i)) i = readReference(text, i).end;
}

/** `<!--…-->`, `<![CDATA[…]]>`; anything else after `<!` is a declaration, which msgx refuses. */
function skipBang(text: string, lt: number): number {
  if (text.startsWith('<!--', lt)) {
    const end = text.indexOf('-->', lt + 4);
    if (end === -1) throw new MalformedError(`not well-formed XML: a comment is never closed (offset ${lt})`);
    const dashes = text.indexOf('--', lt + 4);
    if (dashes < end) throw new MalformedError(`not well-formed XML: "--" inside a comment (offset ${dashes})`);
    return end + 3;
  }
  if (text.startsWith('<![CDATA[', lt)) {
    const end = text.indexOf(']]>', lt + 9);
    if (end === -1) throw new MalformedError(`not well-formed XML: a CDATA section is never closed (offset ${lt})`);
    return end + 3;
  }
  throw new MalformedError(`not well-formed XML: markup declarations (<!…>) are not allowed (offset ${lt})`);
}

/**
 * From `<` to the `>` that ends the tag, outside quotes ('>' may stand in an attribute value, '<'
 * may not). References in attribute values are checked on the way, and attributes counted (each
 * '=' outside quotes): the parsers' cost per attribute is high, and the wire format uses none.
 */
function readStartTag(text: string, lt: number, maxAttributes: number): { end: number; selfClosing: boolean } {
  let quote = 0;
  let attributes = 0;
  let prev = 0;
  for (let i = lt + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (quote) {
      if (c === quote) quote = 0;
      else if (c === 38) i = readReference(text, i).end - 1;
      else if (c === 60) throw new MalformedError(`not well-formed XML: "<" in an attribute value (offset ${i})`);
    } else if (c === 34 || c === 39) quote = c;
    else if (c === 61 /* = */ && ++attributes > maxAttributes)
      throw new MalformedError(`more than ${maxAttributes} attributes on one element (offset ${lt})`);
    else if (c === 62) return { end: i, selfClosing: prev === 47 };
    else if (c === 60) throw new MalformedError(`not well-formed XML: a tag is never closed (offset ${lt})`);
    prev = c;
  }
  throw new MalformedError(`not well-formed XML: a tag is never closed (offset ${lt})`);
}
