import type { ResourceKind } from './vocabulary.ts';
import type { XmlNode } from './xml.ts';

/** The decoded form of an inbound wire message (words: docs/glossary.md; fields: docs/flights.md "Codec"). */
export interface Meta {
  SNDR: string;
  RCVR?: string;
  SEQN: string;
  DTTM?: string;
  TYPE: string;
  STYP?: string;
}

/** One resource item (<ITEM>): its natural key and every child as received, in order. */
export interface Item {
  key: string;
  nodes: XmlNode[];
}

/**
 * A FLIGHT element as received: only what is present. A scalar present with empty text is ''
 * (it clears); a collection present replaces the stored one ([] clears it).
 */
export interface FlightPatch {
  FLID?: string;
  OPDY?: string;
  scalars: Record<string, string>;
  resources: Partial<Record<ResourceKind, Item[]>>;
  /** Elements the model does not know, verbatim and in order; the FLIGHT's own attributes as `@name` nodes. */
  extra: XmlNode[];
  /**
   * The attributes of each known element present (FLID, OPDY, scalars, collections), `[]` when it
   * has none: the element's presence replaces what the state held for it (docs/flights.md "Attributes").
   */
  attrs?: Record<string, [string, string][]>;
}

export interface SchdPayload {
  kind: 'SCHD';
  OPDY?: string;
  CNT?: string;
  /** RESP only: our request's SEQN echoed back, when upstream carries it (exact matching). */
  RQSN?: string;
  flights: FlightPatch[];
}
export interface FlopPayload {
  kind: 'FLOP';
  flights: FlightPatch[];
}
export interface FdelPayload {
  kind: 'FDEL';
  flids: string[];
}
/** Reference-data answer: `<REFD><RTYP>…</RTYP><CNT>n</CNT><REC><RKEY>…</RKEY>…</REC>…</REFD>`. */
export interface RefdPayload {
  kind: 'REFD';
  RTYP?: string;
  CNT?: string;
  records: { RKEY?: string; nodes: XmlNode[] }[];
}
export interface OtherPayload {
  kind: 'OTHER';
}
export type Payload = SchdPayload | FlopPayload | FdelPayload | RefdPayload | OtherPayload;
export type MessageKind = Payload['kind'];

export interface DecodedMessage {
  meta: Meta;
  /** META/TYPE, upper case as received (SCHD, FLOP, FDEL, LDM …). */
  type: string;
  /** META/STYP or '' when absent. */
  subtype: string;
  /** SNDR|TYPE|STYP|SEQN: bound to the message once, used to drop duplicates. */
  identity: string;
  /** DTTM read as airport local time, when present and valid. */
  sentAt?: Date;
  /** The element named by TYPE as ordered nodes ([] when absent). */
  body: XmlNode[];
  /** Which payload model applies; OTHER for types msgx does not model (they are skipped or unsupported). */
  kind: MessageKind;
  payload: Payload;
}

/**
 * SNDR|TYPE|STYP|SEQN; with the day boundary (MSGX_IDENTITY_DAY_BOUNDARY, for an upstream that
 * resets SEQN every day) the DTTM's day is appended: SNDR|TYPE|STYP|SEQN|yyyyMMdd ('' without DTTM).
 */
export const identityOf = (m: Meta, dayBoundary = false): string =>
  [m.SNDR, m.TYPE, m.STYP ?? '', m.SEQN, ...(dayBoundary ? [(m.DTTM ?? '').slice(0, 8)] : [])].join('|');
