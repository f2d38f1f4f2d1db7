import { describe, expect, it } from 'vitest';
import { decode } from '../../lib/codec/decode.ts';
import { encodeRqfd } from '../../lib/codec/encode.ts';
import type { FlopPayload, SchdPayload } from '../../lib/codec/message.ts';
import { nodesToJson } from '../../lib/codec/xml.ts';
import { CodecError, MalformedError, ProtocolError } from '../../lib/shared/errors.ts';
import { fdel, flight, flop, refd, schd } from '../fixtures/messages/build.ts';

const tz = 'Asia/Shanghai';
const d = (text: string) => decode(text, { timezone: tz });

describe('codec: values and structure', () => {
  it('keeps text exactly: leading zeros, no number coercion', () => {
    const m = d(
      schd('DNLD', {
        seqn: '0042',
        dttm: '20261129083000',
        opdy: '20261129',
        flights: [flight({ FLID: '01001', FLNO: '0310', CNTX: '1e3' })],
      }),
    );
    expect(m.meta.SEQN).toBe('0042');
    expect(m.identity).toBe('FIMS|SCHD|DNLD|0042');
    const p = m.payload as SchdPayload;
    expect(p.CNT).toBe('1');
    expect(p.flights[0]!.FLID).toBe('01001');
    expect(p.flights[0]!.scalars.FLNO).toBe('0310');
    expect(p.flights[0]!.extra).toEqual([['CNTX', '1e3']]);
  });

  it('reads DTTM as airport local time in the configured zone', () => {
    const text = flop('ETOT', { seqn: 1, dttm: '20261129083000' }, flight({ FLID: '1' }));
    expect(decode(text, { timezone: 'Asia/Shanghai' }).sentAt?.toISOString()).toBe('2026-11-29T00:30:00.000Z');
    expect(decode(text, { timezone: 'Europe/Berlin' }).sentAt?.toISOString()).toBe('2026-11-29T07:30:00.000Z');
  });

  it('keeps empty elements and unknown elements, in order, nested ones too', () => {
    const text =
      `<MSG><META><SNDR>F</SNDR><SEQN>1</SEQN><TYPE>FLOP</TYPE><STYP>ETOT</STYP></META><FLOP><FLIGHT>` +
      `<ZZZ>z</ZZZ><FLID>1</FLID><ETOT/><AAA><B>1</B><B>2</B><C/></AAA><GATE/></FLIGHT></FLOP></MSG>`;
    const f = (d(text).payload as FlopPayload).flights[0]!;
    expect(f.scalars).toEqual({ ETOT: '' });
    expect(f.resources).toEqual({ GATE: [] });
    expect(f.extra).toEqual([
      ['ZZZ', 'z'],
      [
        'AAA',
        [
          ['B', '1'],
          ['B', '2'],
          ['C', ''],
        ],
      ],
    ]);
    expect(nodesToJson(f.extra)).toEqual({ ZZZ: 'z', AAA: { B: ['1', '2'], C: '' } });
  });

  it('maps resource items with their natural keys and unknown children', () => {
    const f = (
      d(
        flop(
          'GATE',
          { seqn: 1 },
          flight({
            FLID: '1',
            GATE: [{ CODE: 'B12', BEG: '20261129093000', END: '', NOTE: 'x' }],
            ROUT: [{ SEQ: '1', APCD: 'CAN' }],
            CSFL: [{ AWCD: 'MU', FLNO: '0001' }],
          }),
        ),
      ).payload as FlopPayload
    ).flights[0]!;
    expect(f.resources.GATE).toEqual([
      {
        key: 'B12',
        nodes: [
          ['CODE', 'B12'],
          ['BEG', '20261129093000'],
          ['END', ''],
          ['NOTE', 'x'],
        ],
      },
    ]);
    expect(f.resources.ROUT![0]!.key).toBe('1');
    expect(f.resources.CSFL![0]!.key).toBe('MU|0001');
  });

  it('decodes FDEL and REFD payloads; other types are OTHER', () => {
    expect(d(fdel({ seqn: 1 }, '1001')).payload).toEqual({ kind: 'FDEL', flids: ['1001'] });
    const r = d(refd({ seqn: 1 }, 'AIRLINE', [{ RKEY: 'CZ', NAME: 'China Southern' }])).payload;
    expect(r).toMatchObject({ kind: 'REFD', RTYP: 'AIRLINE', CNT: '1', records: [{ RKEY: 'CZ' }] });
    const ldm = d(`<MSG><META><SNDR>F</SNDR><SEQN>1</SEQN><TYPE>LDM</TYPE></META><LDM><X>1</X></LDM></MSG>`);
    expect(ldm.kind).toBe('OTHER');
    expect(ldm.body).toEqual([['X', '1']]);
  });

  it('writes RQFD requests that our own decoder reads back', () => {
    const text = encodeRqfd(
      { sender: 'MSGX', receiver: 'FIMS', seqn: '7', at: new Date('2026-11-29T00:30:00Z'), timezone: tz },
      '20261130',
    );
    const m = d(text);
    expect(m.meta).toMatchObject({ TYPE: 'RQFD', SEQN: '7', DTTM: '20261129083000' });
    expect(m.body).toEqual([['OPDY', '20261130']]);
  });
});

describe('codec: error classes', () => {
  const malformed: [string, string, RegExp][] = [
    ['empty', '   ', /empty/],
    ['not well-formed', '<MSG><META></MSG>', /not well-formed/],
    ['DOCTYPE', '<!DOCTYPE x [<!ENTITY a "b">]><MSG/>', /DOCTYPE/],
    ['ENTITY', '<MSG><!ENTITY a "b"></MSG>', /ENTITY/],
    ['no MSG root', '<X><META/></X>', /no <MSG>/],
    ['no META', '<MSG><FLOP/></MSG>', /META/],
    // A <MSG> root that is empty or holds only text has a root; what it lacks is <META>.
    ['an empty <MSG/>', '<MSG/>', /^no readable <META>$/],
    ['<MSG> holding only text', '<MSG>hello</MSG>', /^no readable <META>$/],
    ['META without SEQN', '<MSG><META><SNDR>F</SNDR><TYPE>FLOP</TYPE></META></MSG>', /without SEQN/],
    ['bad DTTM', '<MSG><META><SNDR>F</SNDR><SEQN>1</SEQN><DTTM>20261399</DTTM><TYPE>FLOP</TYPE></META></MSG>', /DTTM/],
    ['too deep', `<MSG>${'<A>'.repeat(40)}${'</A>'.repeat(40)}</MSG>`, /deeper than/],
    ['two root elements', '<MSG><META><SNDR>F</SNDR><SEQN>1</SEQN><TYPE>LDM</TYPE></META></MSG><MSG/>', /more than one root element/],
  ];
  it.each(malformed)('%s → MALFORMED', (_, text, reason) => {
    expect(() => d(text)).toThrowError(MalformedError);
    expect(() => d(text)).toThrowError(reason);
  });

  it('a type that needs a subtype refuses a message without one as PROTOCOL (not UNSUPPORTED, never retried)', () => {
    for (const type of ['FLOP', 'SCHD']) {
      const text = `<MSG><META><SNDR>F</SNDR><SEQN>1</SEQN><TYPE>${type}</TYPE></META><${type}/></MSG>`;
      expect(() => d(text)).toThrowError(ProtocolError);
      expect(() => d(text)).toThrowError(`${type} requires META/STYP`);
    }
    // Comments and CDATA holding tag-like text are not a second root.
    expect(
      d('<MSG><META><SNDR>F</SNDR><SEQN>1</SEQN><TYPE>LDM</TYPE></META><!-- <X/> --><LDM><![CDATA[</MSG><MSG>]]></LDM></MSG>').type,
    ).toBe('LDM');
  });

  it('refuses too many elements and too many bytes without parsing', () => {
    const many = `<MSG>${'<A/>'.repeat(50)}</MSG>`;
    expect(() => decode(many, { timezone: tz, limits: { maxElements: 20 } })).toThrowError(/more than 20 elements/);
    expect(() => decode(many, { timezone: tz, limits: { maxBytes: 100 } })).toThrowError(/larger than 100 bytes/);
  });

  it('counts elements only: tag-like text in comments, CDATA and processing instructions and end tags are not elements', () => {
    const meta = '<META><SNDR>F</SNDR><SEQN>1</SEQN><TYPE>LDM</TYPE></META>';
    // 8 elements (MSG, META and its 3 children, LDM, two A), and 50 tag-like texts that are not.
    const tagLike = '<X/>'.repeat(50);
    const text = `<MSG>${meta}<!-- ${tagLike} --><?pi ${tagLike}?><LDM><![CDATA[${tagLike}]]><A/><A></A></LDM></MSG>`;
    expect(decode(text, { timezone: tz, limits: { maxElements: 8 } }).type).toBe('LDM');
    expect(() => decode(text, { timezone: tz, limits: { maxElements: 7 } })).toThrowError(/more than 7 elements/);
    // A comment whose end is missing is named as such, not counted as a flood of what follows it.
    const unclosed = `<MSG>${meta}<!-- ${'<X/>'.repeat(50)}</MSG>`;
    expect(() => decode(unclosed, { timezone: tz, limits: { maxElements: 8 } })).toThrowError(/a comment is never closed/);
  });

  it('a known element it cannot map is CODEC_ERROR (retried, replayable after a fix)', () => {
    const text = `<MSG><META><SNDR>F</SNDR><SEQN>1</SEQN><TYPE>FLOP</TYPE><STYP>ETOT</STYP></META><FLOP><FLIGHT><FLID>1</FLID><ETOT><X>1</X></ETOT></FLIGHT></FLOP></MSG>`;
    expect(() => d(text)).toThrowError(CodecError);
    const gate = `<MSG><META><SNDR>F</SNDR><SEQN>1</SEQN><TYPE>FLOP</TYPE><STYP>GATE</STYP></META><FLOP><FLIGHT><FLID>1</FLID><GATE><SLOT/></GATE></FLIGHT></FLOP></MSG>`;
    expect(() => d(gate)).toThrowError(CodecError);
  });

  it('protocol violations inside a package are PROTOCOL', () => {
    expect(() => d(flop('ETOT', { seqn: 1 }, flight({ FLID: '1', ETOT: 'soon' })))).toThrowError(ProtocolError);
    expect(() => d(flop('GATE', { seqn: 1 }, flight({ FLID: '1', GATE: [{ BEG: '20261129093000' }] })))).toThrowError(/has no CODE/);
    expect(() => d(flop('GATE', { seqn: 1 }, flight({ FLID: '1', GATE: [{ CODE: 'A' }, { CODE: 'A' }] })))).toThrowError(/twice/);
    expect(() => d(flop('ETOT', { seqn: 1 }, '<FLIGHT><FLID>1</FLID><FLNO>1</FLNO><FLNO>2</FLNO></FLIGHT>'))).toThrowError(
      /more than once/,
    );
  });

  it('keeps unknown elements named like Object.prototype members as received', () => {
    const text = flop(
      'UPDT',
      { seqn: 1 },
      '<FLIGHT><FLID>1</FLID><toString>a</toString><valueOf>b</valueOf><toString>c</toString></FLIGHT>',
    );
    const p = d(text).payload as FlopPayload;
    expect(p.flights[0]!.extra).toEqual([
      ['toString', 'a'],
      ['valueOf', 'b'],
      ['toString', 'c'],
    ]);
    expect(nodesToJson(p.flights[0]!.extra)).toEqual({ toString: ['a', 'c'], valueOf: 'b' });
  });

  it('never expands a billion-laughs body: an undeclared reference is refused, predefined ones decode one for one', () => {
    const refs = '&lol9;'.repeat(10_000) + '&amp;';
    const undeclared = flop('UPDT', { seqn: 1 }, `<FLIGHT><FLID>1</FLID><XREM>${refs}</XREM></FLIGHT>`);
    expect(() => d(undeclared)).toThrowError(/the entity &lol9; is not declared/);
    // Predefined references replace one for one: output never larger than input.
    const amps = '&amp;'.repeat(10_000);
    const text = flop('UPDT', { seqn: 1 }, `<FLIGHT><FLID>1</FLID><XREM>${amps}</XREM></FLIGHT>`);
    const p = d(text).payload as FlopPayload;
    expect(p.flights[0]!.extra).toEqual([['XREM', '&'.repeat(10_000)]]);
    expect(JSON.stringify(d(text)).length).toBeLessThan(2 * text.length);
    // The classic bomb (10 levels of ten) would be 10^10 "lol"s: refused before any parsing.
    const levels = Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${`&lol${i};`.repeat(10)}">`).join('');
    const bomb =
      `<?xml version="1.0"?><!DOCTYPE MSG [<!ENTITY lol0 "lol">${levels}]>` +
      flop('UPDT', { seqn: 1 }, '<FLIGHT><FLID>1</FLID><XREM>&lol9;</XREM></FLIGHT>');
    expect(() => d(bomb)).toThrowError(MalformedError);
    expect(() => d(bomb)).toThrowError(/DOCTYPE/);
  });
});
