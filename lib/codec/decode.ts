import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { CodecError, MalformedError } from '../shared/errors.ts';
import { localTimeToDate } from '../shared/time.ts';
import { type DecodedMessage, identityOf, type Meta } from './message.ts';

export const DEFAULT_LIMITS = { maxBytes: 1024 * 1024, maxDepth: 32 };

const parser = new XMLParser({
  ignoreAttributes: true,
  processEntities: false,
  htmlEntities: false,
  parseTagValue: false, // keep text exactly: SEQN 0042 stays "0042"
  parseAttributeValue: false,
  trimValues: true,
  isArray: (name) => name === 'ITEM' || name === 'FLIGHT',
});

/** Cheap checks that refuse hostile input before a parser ever sees it. */
export function precheck(text: string, limits = DEFAULT_LIMITS): void {
  if (text.trim() === '') throw new MalformedError('empty message');
  if (Buffer.byteLength(text, 'utf8') > limits.maxBytes)
    throw new MalformedError(`message larger than ${limits.maxBytes} bytes`);
  if (/<!DOCTYPE/i.test(text)) throw new MalformedError('DOCTYPE is not allowed');
  if (/<!ENTITY/i.test(text)) throw new MalformedError('ENTITY declarations are not allowed');
}

/** Well-formedness only (used by the ingress to refuse before storing anything). */
export function checkWellFormed(text: string, limits = DEFAULT_LIMITS): void {
  precheck(text, limits);
  const v = XMLValidator.validate(text);
  if (v !== true) throw new MalformedError(`not well-formed XML: ${v.err.msg} (line ${v.err.line})`);
}

export function decode(text: string, options: { timezone: string; limits?: typeof DEFAULT_LIMITS }): DecodedMessage {
  const limits = options.limits ?? DEFAULT_LIMITS;
  checkWellFormed(text, limits);
  let doc: Record<string, unknown>;
  try {
    doc = parser.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new MalformedError(`not well-formed XML: ${(err as Error).message}`);
  }
  const root = doc.MSG;
  if (!root || typeof root !== 'object') throw new MalformedError('no <MSG> root element');
  const metaNode = (root as Record<string, unknown>).META;
  if (!metaNode || typeof metaNode !== 'object') throw new MalformedError('no readable <META>');
  const meta = readMeta(metaNode as Record<string, unknown>);
  const type = meta.TYPE.toUpperCase();
  let sentAt: Date | undefined;
  if (meta.DTTM) {
    try {
      sentAt = localTimeToDate(meta.DTTM, options.timezone);
    } catch (err) {
      throw new MalformedError(`META/DTTM: ${(err as Error).message}`);
    }
  }
  const body = (root as Record<string, unknown>)[meta.TYPE];
  return { meta, type, subtype: (meta.STYP ?? '').toUpperCase(), identity: identityOf(meta), sentAt, body };
}

function readMeta(node: Record<string, unknown>): Meta {
  const text = (name: string): string | undefined => {
    const v = node[name];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new MalformedError(`META/${name} is not text`);
    return v;
  };
  const SNDR = text('SNDR');
  const TYPE = text('TYPE');
  const SEQN = text('SEQN');
  const missing = [!SNDR && 'SNDR', !TYPE && 'TYPE', !SEQN && 'SEQN'].filter(Boolean);
  if (missing.length) throw new MalformedError(`META without ${missing.join(', ')}`);
  return { SNDR: SNDR!, TYPE: TYPE!, SEQN: SEQN!, RCVR: text('RCVR'), DTTM: text('DTTM'), STYP: text('STYP') };
}

export { CodecError };
