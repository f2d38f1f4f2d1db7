import { formatLocalTime } from '../shared/time.ts';

/** Outbound requests msgx writes to COUTMSGS. Values are ours (days, codes), escaped anyway. */
export interface OutboundMeta {
  sender: string;
  receiver: string;
  /** Our request ID: upstream echoes it, and a duplicate write is recognisable by it. */
  seqn: string;
  at: Date;
  timezone: string;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function envelope(m: OutboundMeta, type: string, styp: string, body: string): string {
  return (
    `<MSG><META><SNDR>${esc(m.sender)}</SNDR><RCVR>${esc(m.receiver)}</RCVR><SEQN>${esc(m.seqn)}</SEQN>` +
    `<DTTM>${formatLocalTime(m.at, m.timezone)}</DTTM><TYPE>${type}</TYPE><STYP>${styp}</STYP></META>` +
    `<${type}>${body}</${type}></MSG>`
  );
}

/** RQFD: ask upstream for every flight of an operation day; it answers with SCHD/RESP. */
export const encodeRqfd = (m: OutboundMeta, day: string): string => envelope(m, 'RQFD', 'DAY', `<OPDY>${esc(day)}</OPDY>`);

/** RQRF: ask upstream for one reference-data set; it answers with REFD. */
export const encodeRqrf = (m: OutboundMeta, rtype: string): string => envelope(m, 'RQRF', 'REF', `<RTYP>${esc(rtype)}</RTYP>`);
