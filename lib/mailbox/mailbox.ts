import { decodeUtf8Strict } from '../codec/utf8.ts';

/**
 * The shared mailbox (CMINMSGS inbound, COUTMSGS outbound), owned by another system. msgx reads
 * unprocessed rows, back-fills the processed ones and writes outbound requests; nothing else.
 * Two implementations: MySQL (the real shared mailbox) and tables in msgx's PostgreSQL (twin).
 */
export interface MailboxRow {
  id: number;
  receivedAt: Date;
}

/** A mailbox ID as the frontier sees it (lib/pipeline/gaps.ts). */
export interface MailboxId {
  id: number;
  receivedAt: Date | null;
  /** DATE_PROCESSED is set. */
  processed: boolean;
}

export interface BackfillMark {
  id: number;
  status: string;
  note: string | null;
  processedAt: Date;
}

/**
 * Which of the optional back-fill columns CMINMSGS has. The owner agreed only to DATE_PROCESSED (the
 * "processed" marker); PROC_STATUS and PROC_NOTE are written where they exist and skipped where not.
 */
export interface MarkColumns {
  procStatus: boolean;
  procNote: boolean;
}

/** The start log's words for MarkColumns (README "Decisions where the design was silent"). */
export const describeMarkColumns = (c: MarkColumns): string =>
  `DATE_PROCESSED${c.procStatus ? ', PROC_STATUS' : ''}${c.procNote ? ', PROC_NOTE' : ''}` +
  (c.procStatus && c.procNote
    ? ''
    : ` (no ${[c.procStatus ? '' : 'PROC_STATUS', c.procNote ? '' : 'PROC_NOTE'].filter(Boolean).join(', ')}: not written)`);

export interface Mailbox {
  readonly kind: 'mysql' | 'pg';
  /**
   * Looks up (once; later calls answer from memory) which of PROC_STATUS/PROC_NOTE CMINMSGS has.
   * markProcessed() writes only those.
   */
  markColumns(): Promise<MarkColumns>;
  /** Stores an inbound message the way other systems do; returns its ID. */
  insertInbound(text: string): Promise<number>;
  /** Unprocessed rows with afterId < ID ≤ upTo, in ID order, at most `limit`. */
  scanUnprocessed(afterId: number, limit: number, upTo?: number): Promise<MailboxRow[]>;
  /** Every row with ID > afterId (processed or not), in ID order, at most `limit`: ID, date, flag only. */
  scanIds(afterId: number, limit: number): Promise<MailboxId[]>;
  /** The rows inside these inclusive ID ranges (primary-key range reads). */
  readRanges(ranges: [number, number][]): Promise<MailboxId[]>;
  /**
   * Raw texts by ID; an ID absent from the map has no row (or a NULL text). A text whose bytes are
   * not UTF-8 comes back as `{ undecodable, lossy }`: the reason, and a copy for people to read
   * with U+FFFD in place of the bad bytes, never to process. Errors throw.
   */
  readTexts(ids: number[]): Promise<Map<number, MailboxText>>;
  /**
   * Sets DATE_PROCESSED (and PROC_STATUS/PROC_NOTE where the table has them) on rows not yet
   * processed, or marked DEAD (msgx's own verdict: a replayed message's new outcome replaces it;
   * without PROC_STATUS the first mark stays); idempotent.
   */
  markProcessed(marks: BackfillMark[]): Promise<void>;
  /** Of these IDs, the ones still unprocessed in the mailbox. */
  filterUnprocessed(ids: number[]): Promise<number[]>;
  /** Writes an outbound message (COUTMSGS); returns its ID. */
  insertOutbound(text: string): Promise<number>;
  /** Whether an outbound row exists (confirms a request was written). */
  outboundExists(id: number): Promise<boolean>;
  /**
   * The earliest of the newest `window` outbound rows whose text contains every one of
   * `fragments` (a request's own marker), or undefined: how a write whose outcome was never
   * confirmed is reconciled before anything is resent.
   */
  findOutbound(fragments: string[], window: number): Promise<number | undefined>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * MSG_TEXT as the mailbox holds it: the text, or the reason its bytes are not text. Only bytes the
 * database does not decode itself can be undecodable: a binary column (BLOB, VARBINARY) or a
 * PostgreSQL database in SQL_ASCII. A column with a declared character set (utf8mb4, latin1, …)
 * is converted by the server and is always valid text (docs/ordering.md "Character sets").
 */
export type MailboxText = string | { undecodable: string; lossy: string };

/** A MSG_TEXT value as a driver returns it (text, or bytes for a binary value) → MailboxText. */
export function mailboxText(value: string | Uint8Array): MailboxText {
  if (typeof value === 'string') return value;
  const r = decodeUtf8Strict(value);
  return r.error === undefined ? r.text : { undecodable: `MSG_TEXT is ${r.error}`, lossy: Buffer.from(value).toString('utf8') };
}

/** PROC_NOTE is VARCHAR(1000); longer reasons are cut, never rejected. */
export const clipNote = (note: string | null): string | null =>
  note === null ? null : note.length > 1000 ? `${note.slice(0, 997)}...` : note;

/** A LIKE pattern matching text that contains `fragment` literally (`\\` is the escape of both dialects). */
export const likeContaining = (fragment: string): string => `%${fragment.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
