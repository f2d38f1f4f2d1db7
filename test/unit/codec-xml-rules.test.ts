import { describe, expect, it } from 'vitest';
import { checkWellFormed, decode } from '../../lib/codec/decode.ts';
import type { FlopPayload } from '../../lib/codec/message.ts';
import { nodesToJson } from '../../lib/codec/xml.ts';
import { applyPatch, blankFlight, diffFlights } from '../../lib/flights/model.ts';
import { MalformedError } from '../../lib/shared/errors.ts';

/**
 * Every XML 1.0 rule the codec claims (docs/flights.md "XML"), each with an input it accepts and
 * one it refuses. Accepted inputs put the construct in a remark (`XREM`, an unknown FLIGHT child)
 * and say what the flight's JSON then holds; refused ones say what the reason must name. The
 * ingress check (checkWellFormed) and the pump's decode must agree on every row.
 */
const tz = 'Asia/Shanghai';
const wrap = (flightInner: string, root = '<MSG>') =>
  `${root}<META><SNDR>FIMS</SNDR><SEQN>1</SEQN><TYPE>FLOP</TYPE><STYP>UPDT</STYP></META>` +
  `<FLOP><FLIGHT><FLID>F1</FLID>${flightInner}</FLIGHT></FLOP></MSG>`;
const remark = (xml: string) => wrap(`<XREM>${xml}</XREM>`);
/** The flight's non-scalar JSON after the message is applied to a blank flight (what the read API shows besides the fields). */
const json = (text: string) =>
  nodesToJson(applyPatch(blankFlight('F1', '20261129'), (decode(text, { timezone: tz }).payload as FlopPayload).flights[0]!).extra);

interface Rule {
  rule: string;
  accepted: { input: string; json: Record<string, unknown> };
  refused: { input: string; reason: RegExp };
}

const RULES: Rule[] = [
  {
    rule: 'the five predefined entities are replaced in text',
    accepted: { input: remark('A &amp; B &lt;C&gt; &quot;d&quot; &apos;e&apos;'), json: { XREM: `A & B <C> "d" 'e'` } },
    refused: { input: remark('A &ampx; B'), reason: /the entity &ampx; is not declared/ },
  },
  {
    rule: 'decimal and hexadecimal character references are replaced',
    accepted: { input: remark('&#65;&#x4E2D;&#x1F600;'), json: { XREM: 'A中😀' } },
    refused: { input: remark('&#65'), reason: /not well-formed XML: "&#65<" is not a character reference/ },
  },
  {
    rule: 'a reference to an undeclared entity is refused (no DOCTYPE can declare one)',
    accepted: { input: remark('&amp;x;'), json: { XREM: '&x;' } },
    refused: { input: remark('&x;'), reason: /the entity &x; is not declared/ },
  },
  {
    rule: 'a character reference must name an XML Char: not U+0000',
    accepted: { input: remark('&#x9;tab'), json: { XREM: '\ttab' } },
    refused: { input: remark('&#x0;'), reason: /&#x0; is not allowed in XML: U\+0000 is not an XML character/ },
  },
  {
    rule: 'a character reference must name an XML Char: no C0 control but tab, LF, CR',
    accepted: { input: remark('a&#10;b'), json: { XREM: 'a\nb' } },
    refused: { input: remark('&#1;'), reason: /&#1; is not allowed in XML: U\+0001/ },
  },
  {
    rule: 'a character reference must name an XML Char: no surrogate',
    accepted: { input: remark('&#xD7FF;'), json: { XREM: '\uD7FF' } },
    refused: { input: remark('&#xDFFF;'), reason: /&#xDFFF; is not allowed in XML: is a surrogate/ },
  },
  {
    rule: 'a character reference must name an XML Char: nothing beyond U+10FFFF, however many digits',
    accepted: { input: remark('&#x10FFFD;'), json: { XREM: String.fromCodePoint(0x10fffd) } },
    refused: { input: remark(`&#${'9'.repeat(40)};`), reason: /is beyond U\+10FFFF/ },
  },
  {
    rule: 'a character reference must name an XML Char: not U+FFFE/U+FFFF',
    accepted: { input: remark('&#xFFFD;'), json: { XREM: '\uFFFD' } },
    refused: { input: remark('&#xFFFF;'), reason: /U\+FFFF is not an XML character/ },
  },
  {
    rule: 'a bare "&" is refused',
    accepted: { input: remark('fish &amp; chips'), json: { XREM: 'fish & chips' } },
    refused: { input: remark('fish & chips'), reason: /"&" must start a reference/ },
  },
  {
    rule: '"]]>" may not stand in text; inside CDATA it ends the section',
    accepted: { input: remark(']]&gt;'), json: { XREM: ']]>' } },
    refused: { input: remark('a ]]> b'), reason: /"]]>" is not allowed in text/ },
  },
  {
    rule: 'CDATA is literal: references in it stay as written',
    accepted: { input: remark('<![CDATA[A &amp; <b>]]>'), json: { XREM: 'A &amp; <b>' } },
    refused: { input: remark('<![CDATA[never closed'), reason: /CDATA section is never closed/ },
  },
  {
    rule: 'comments are dropped; "--" may not stand inside one',
    accepted: { input: remark('a<!-- note -->'), json: { XREM: 'a' } },
    refused: { input: remark('a<!-- x -- y -->'), reason: /"--" inside a comment/ },
  },
  {
    rule: 'attributes are kept as "@name" on their element, references replaced, empty values kept',
    accepted: {
      input: wrap('<XREM lang="zh" by="A &amp; B" empty="">x</XREM>'),
      json: { XREM: { '@lang': 'zh', '@by': 'A & B', '@empty': '', '#text': 'x' } },
    },
    refused: { input: wrap('<XREM by="&x;">x</XREM>'), reason: /the entity &x; is not declared/ },
  },
  {
    rule: 'attribute values are normalised: a literal tab or line break is a space, a reference to one is kept',
    accepted: { input: wrap('<XREM a="1\t2\r\n3" b="x&#10;y"/>'), json: { XREM: { '@a': '1 2 3', '@b': 'x\ny' } } },
    refused: { input: wrap('<XREM a="1<2"/>'), reason: /"<" in an attribute value/ },
  },
  {
    rule: 'an attribute appears once per element',
    accepted: { input: wrap('<XREM a="1" b="1"/>'), json: { XREM: { '@a': '1', '@b': '1' } } },
    refused: { input: wrap('<XREM a="1" a="2"/>'), reason: /not well-formed XML: .*repeated/i },
  },
  {
    rule: 'attribute values are quoted',
    accepted: { input: wrap(`<XREM a='1'/>`), json: { XREM: { '@a': '1' } } },
    refused: { input: wrap('<XREM a=1/>'), reason: /not well-formed XML/ },
  },
  {
    rule: "the FLIGHT's own attributes are kept on the flight",
    accepted: { input: wrap('<XREM>x</XREM>').replace('<FLIGHT>', '<FLIGHT src="ods">'), json: { '@src': 'ods', XREM: 'x' } },
    refused: { input: wrap('<XREM>x</XREM>').replace('<FLIGHT>', '<FLIGHT src="&nbsp;">'), reason: /the entity &nbsp; is not declared/ },
  },
  {
    rule: 'a known field\'s attributes are kept under "@", the field keeps its text',
    accepted: { input: wrap('<ETOT src="A">20261129100000</ETOT>'), json: { '@': { ETOT: { '@src': 'A' } } } },
    refused: { input: wrap('<ETOT src="A" src="B">20261129100000</ETOT>'), reason: /not well-formed XML/ },
  },
  {
    rule: 'one root element',
    accepted: { input: `<?xml version="1.0"?><!-- before -->${remark('x')}<!-- after -->`, json: { XREM: 'x' } },
    refused: { input: `${remark('x')}<MSG/>`, reason: /more than one root element/ },
  },
  {
    rule: 'no DOCTYPE and no other markup declaration',
    accepted: { input: remark('&lt;!DOCTYPE x&gt;'.replace('DOCTYPE', 'DOC')), json: { XREM: '<!DOC x>' } },
    refused: { input: remark('<!ELEMENT x ANY>'), reason: /markup declarations/ },
  },
  {
    rule: 'only XML characters in the text',
    accepted: { input: remark('tab\tand\nline'), json: { XREM: 'tab\tand\nline' } },
    refused: { input: remark('bell\u0007'), reason: /U\+0007 is not allowed in XML/ },
  },
  {
    rule: 'line ends are normalised to LF',
    accepted: { input: remark('a\r\nb\rc'), json: { XREM: 'a\nb\nc' } },
    refused: { input: remark('a\r\nb\u0000'), reason: /U\+0000 is not allowed in XML/ },
  },
];

describe('codec: XML 1.0 rules, one accepted and one refused input each', () => {
  it.each(RULES)('$rule', ({ accepted, refused }) => {
    expect(json(accepted.input)).toEqual(accepted.json);
    expect(() => checkWellFormed(accepted.input)).not.toThrow();
    let err: unknown;
    try {
      decode(refused.input, { timezone: tz });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MalformedError);
    expect((err as Error).message).toMatch(refused.reason);
    // The ingress refuses exactly what the pump would call MALFORMED.
    expect(() => checkWellFormed(refused.input)).toThrowError(refused.reason);
  });

  it('the read side carries "A & B", never "A &amp; B", through FLIGHT, ITEM and META alike', () => {
    const text =
      `<MSG><META><SNDR>A&amp;B</SNDR><SEQN>&#49;</SEQN><TYPE>FLOP</TYPE><STYP>GATE</STYP></META>` +
      `<FLOP><FLIGHT><FLID>F&amp;1</FLID><GATE><ITEM kind="x&lt;y"><CODE note="n">B&amp;12</CODE></ITEM></GATE></FLIGHT></FLOP></MSG>`;
    const m = decode(text, { timezone: tz });
    expect(m.identity).toBe('A&B|FLOP|GATE|1');
    const f = (m.payload as FlopPayload).flights[0]!;
    expect(f.FLID).toBe('F&1');
    expect(f.resources.GATE![0]!.key).toBe('B&12');
    expect(nodesToJson(f.resources.GATE![0]!.nodes)).toEqual({ '@kind': 'x<y', CODE: 'B&12', '@': { CODE: { '@note': 'n' } } });
  });
});

describe('attributes of known fields in the flight state', () => {
  const patchOf = (inner: string) => (decode(wrap(inner), { timezone: tz }).payload as FlopPayload).flights[0]!;
  it('the same attributes again change nothing; the field sent without them drops them', () => {
    const first = applyPatch(blankFlight('F1', '20261129'), patchOf('<ETOT src="A">20261129100000</ETOT><XREM>r</XREM>'));
    expect(nodesToJson(first.extra)).toEqual({ XREM: 'r', '@': { ETOT: { '@src': 'A' } } });
    const again = applyPatch(first, patchOf('<ETOT src="A">20261129100000</ETOT>'));
    expect(diffFlights(first, again).fields).toEqual([]);
    const without = applyPatch(again, patchOf('<ETOT>20261129110000</ETOT>'));
    expect(nodesToJson(without.extra)).toEqual({ XREM: 'r' });
    expect(diffFlights(again, without).fields).toEqual(['ETOT', '@']);
  });
});
