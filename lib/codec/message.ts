/** The decoded form of an inbound wire message (see DESIGN.md "Wire format"). */
export interface Meta {
  SNDR: string;
  RCVR?: string;
  SEQN: string;
  DTTM?: string;
  TYPE: string;
  STYP?: string;
}

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
  /** The element named by TYPE (e.g. the <SCHD> element), as the codec models it. */
  body: unknown;
}

export const identityOf = (m: Meta): string => [m.SNDR, m.TYPE, m.STYP ?? '', m.SEQN].join('|');
