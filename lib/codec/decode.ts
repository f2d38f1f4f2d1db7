import { MalformedError, ProtocolError } from '../shared/errors.ts';
import { localTimeToDate } from '../shared/time.ts';
import { decodeFlight, text } from './flight.ts';
import { type DecodedMessage, identityOf, type Meta, type Payload } from './message.ts';
import { checkWellFormed, child, DEFAULT_LIMITS, parseXml, textOf, type XmlLimits, type XmlNode, type XmlValue } from './xml.ts';

export { checkWellFormed, DEFAULT_LIMITS };

/**
 * Text → DecodedMessage. Not well-formed or hostile input → MalformedError; a known element in a
 * shape the model cannot map → CodecError (retried, replayable after a fix); a package that breaks
 * the protocol (missing keys, bad times) → ProtocolError.
 */
export function decode(text: string, options: { timezone: string; limits?: Partial<XmlLimits>; dayBoundary?: boolean }): DecodedMessage {
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const doc = parseXml(text, limits);
  const root = child(doc, 'MSG');
  if (root === undefined) throw new MalformedError('no <MSG> root element');
  // `<MSG/>` or `<MSG>text</MSG>`: the root is there, what is missing is its <META>.
  if (typeof root === 'string') throw new MalformedError('no readable <META>');
  const metaNode = child(root, 'META');
  if (metaNode === undefined || typeof metaNode === 'string') throw new MalformedError('no readable <META>');
  const meta = readMeta(metaNode);
  const type = meta.TYPE.toUpperCase();
  let sentAt: Date | undefined;
  if (meta.DTTM) {
    try {
      sentAt = localTimeToDate(meta.DTTM, options.timezone);
    } catch (err) {
      throw new MalformedError(`META/DTTM: ${(err as Error).message}`);
    }
  }
  // A type whose processing depends on its subtype cannot be handled without one: refused now
  // (DEAD(PROTOCOL)), not retried as UNSUPPORTED while it holds the head.
  if (SUBTYPE_REQUIRED.has(type) && !meta.STYP) throw new ProtocolError(`${type} requires META/STYP`);
  const bodyValue = child(root, meta.TYPE);
  const body: XmlNode[] = bodyValue === undefined || typeof bodyValue === 'string' ? [] : bodyValue;
  const payload = decodePayload(type, body);
  return {
    meta,
    type,
    subtype: (meta.STYP ?? '').toUpperCase(),
    identity: identityOf(meta, options.dayBoundary),
    sentAt,
    body,
    kind: payload.kind,
    payload,
  };
}

const SUBTYPE_REQUIRED: ReadonlySet<string> = new Set(['SCHD', 'FLOP']);

function readMeta(nodes: XmlNode[]): Meta {
  const get = (name: string): string | undefined => {
    const raw = child(nodes, name);
    if (raw === undefined) return undefined;
    const v = textOf(raw);
    if (v === undefined) throw new MalformedError(`META/${name} is not text`);
    return v === '' ? undefined : v;
  };
  const SNDR = get('SNDR');
  const TYPE = get('TYPE');
  const SEQN = get('SEQN');
  const missing = [!SNDR && 'SNDR', !TYPE && 'TYPE', !SEQN && 'SEQN'].filter(Boolean);
  if (missing.length) throw new MalformedError(`META without ${missing.join(', ')}`);
  return { SNDR: SNDR!, TYPE: TYPE!, SEQN: SEQN!, RCVR: get('RCVR'), DTTM: get('DTTM'), STYP: get('STYP') };
}

function decodePayload(type: string, body: XmlNode[]): Payload {
  switch (type) {
    case 'SCHD':
      return {
        kind: 'SCHD',
        OPDY: optionalText(body, 'OPDY', 'SCHD'),
        CNT: optionalText(body, 'CNT', 'SCHD'),
        RQSN: optionalText(body, 'RQSN', 'SCHD'),
        flights: flightsOf(body, 'SCHD'),
      };
    case 'FLOP':
      return { kind: 'FLOP', flights: flightsOf(body, 'FLOP') };
    case 'FDEL':
      return {
        kind: 'FDEL',
        flids: flightsOf(body, 'FDEL').map((f, i) => {
          if (!f.FLID) throw new ProtocolError(`FDEL/FLIGHT[${i + 1}] has no FLID`);
          return f.FLID;
        }),
      };
    case 'REFD':
      return {
        kind: 'REFD',
        RTYP: optionalText(body, 'RTYP', 'REFD'),
        CNT: optionalText(body, 'CNT', 'REFD'),
        records: body
          .filter((n) => n[0] === 'REC')
          .map(([, v], i) => {
            const nodes = typeof v === 'string' ? [] : v;
            const key = child(nodes, 'RKEY');
            return { RKEY: key === undefined ? undefined : text(key, `REFD/REC[${i + 1}]/RKEY`), nodes };
          }),
      };
    default:
      return { kind: 'OTHER' };
  }
}

function optionalText(nodes: XmlNode[], name: string, where: string): string | undefined {
  const v: XmlValue | undefined = child(nodes, name);
  return v === undefined ? undefined : text(v, `${where}/${name}`);
}

function flightsOf(body: XmlNode[], where: string) {
  return body.filter((n) => n[0] === 'FLIGHT').map(([, v], i) => decodeFlight(v, `${where}/FLIGHT[${i + 1}]`));
}
