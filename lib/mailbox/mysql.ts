import mysql from 'mysql2/promise';
import { mailboxDdl } from './ddl.ts';
import type { BackfillMark, Mailbox, MailboxId, MailboxRow, MailboxText, MarkColumns } from './mailbox.ts';
import { clipNote, likeContaining, mailboxText } from './mailbox.ts';
import { type MysqlPoolOptions, refreshingPool } from './mysqlPool.ts';

export class MysqlMailbox implements Mailbox {
  readonly kind = 'mysql' as const;
  readonly #pool: Pick<mysql.Pool, 'query' | 'execute' | 'end'>;
  #columns: Promise<MarkColumns> | undefined;

  /** TLS and credential refresh: see mysqlPool.ts. */
  constructor(url: string, options: MysqlPoolOptions = {}) {
    this.#pool = refreshingPool(url, options);
  }

  /** Twin only: create CMINMSGS/COUTMSGS when missing. The cloud never touches the owner's DDL. */
  async ensureTables(): Promise<void> {
    for (const stmt of splitStatements(mailboxDdl('mysql'))) await this.#pool.query(stmt);
  }

  markColumns(): Promise<MarkColumns> {
    // Column names are case-insensitive in MySQL; the table's name is matched as the DDL writes it.
    this.#columns ??= this.#pool
      .query<mysql.RowDataPacket[]>(
        `SELECT UPPER(COLUMN_NAME) AS C FROM information_schema.COLUMNS
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'CMINMSGS' AND UPPER(COLUMN_NAME) IN ('PROC_STATUS', 'PROC_NOTE')`,
      )
      .then(([rows]) => ({ procStatus: rows.some((r) => r.C === 'PROC_STATUS'), procNote: rows.some((r) => r.C === 'PROC_NOTE') }))
      .catch((err: unknown) => {
        this.#columns = undefined;
        throw err;
      });
    return this.#columns;
  }

  async insertInbound(text: string): Promise<number> {
    const [r] = await this.#pool.execute<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [text]);
    return r.insertId;
  }

  async scanUnprocessed(afterId: number, limit: number, upTo = Number.MAX_SAFE_INTEGER): Promise<MailboxRow[]> {
    const [rows] = await this.#pool.query<mysql.RowDataPacket[]>(
      'SELECT ID, DATE_RECEIVED FROM CMINMSGS WHERE DATE_PROCESSED IS NULL AND ID > ? AND ID <= ? ORDER BY ID LIMIT ?',
      [afterId, upTo, limit],
    );
    return rows.map((r) => ({ id: Number(r.ID), receivedAt: r.DATE_RECEIVED as Date }));
  }

  async scanIds(afterId: number, limit: number): Promise<MailboxId[]> {
    const [rows] = await this.#pool.query<mysql.RowDataPacket[]>(
      'SELECT ID, DATE_RECEIVED, DATE_PROCESSED IS NOT NULL AS P FROM CMINMSGS WHERE ID > ? ORDER BY ID LIMIT ?',
      [afterId, limit],
    );
    return rows.map(toId);
  }

  async readRanges(ranges: [number, number][]): Promise<MailboxId[]> {
    if (ranges.length === 0) return [];
    const where = ranges.map(() => '(ID BETWEEN ? AND ?)').join(' OR ');
    const [rows] = await this.#pool.query<mysql.RowDataPacket[]>(
      `SELECT ID, DATE_RECEIVED, DATE_PROCESSED IS NOT NULL AS P FROM CMINMSGS WHERE ${where} ORDER BY ID`,
      ranges.flat(),
    );
    return rows.map(toId);
  }

  async readTexts(ids: number[]): Promise<Map<number, MailboxText>> {
    const out = new Map<number, MailboxText>();
    if (ids.length === 0) return out;
    const [rows] = await this.#pool.query<mysql.RowDataPacket[]>('SELECT ID, MSG_TEXT FROM CMINMSGS WHERE ID IN (?)', [ids]);
    // A text column (utf8mb4, latin1, …) arrives as a string the server converted to utf8mb4 from
    // text it validated on every write; a binary column (LONGBLOB, VARBINARY) arrives as the
    // owner's bytes, which must be UTF-8 (mailboxText refuses them otherwise, no U+FFFD).
    for (const r of rows) if (r.MSG_TEXT !== null) out.set(Number(r.ID), mailboxText(r.MSG_TEXT as Buffer | string));
    return out;
  }

  async markProcessed(marks: BackfillMark[]): Promise<void> {
    if (marks.length === 0) return;
    const cols = await this.markColumns();
    // One round trip per batch: a CASE per column keeps each row's own status and note.
    const ids = marks.map((m) => m.id);
    const params: unknown[] = [];
    const set: string[] = [];
    const caseOf = (column: string, value: (m: BackfillMark) => unknown) =>
      set.push(`${column} = CASE ID ${marks.map((m) => (params.push(m.id, value(m)), 'WHEN ? THEN ?')).join(' ')} END`);
    if (cols.procStatus) caseOf('PROC_STATUS', (m) => m.status);
    if (cols.procNote) caseOf('PROC_NOTE', (m) => clipNote(m.note));
    caseOf('DATE_PROCESSED', (m) => m.processedAt);
    params.push(ids);
    await this.#pool.query(
      `UPDATE CMINMSGS SET ${set.join(', ')}
       WHERE ID IN (?) AND (DATE_PROCESSED IS NULL${cols.procStatus ? " OR PROC_STATUS = 'DEAD'" : ''})`,
      params,
    );
  }

  async filterUnprocessed(ids: number[]): Promise<number[]> {
    if (ids.length === 0) return [];
    const [rows] = await this.#pool.query<mysql.RowDataPacket[]>(
      'SELECT ID FROM CMINMSGS WHERE ID IN (?) AND DATE_PROCESSED IS NULL ORDER BY ID',
      [ids],
    );
    return rows.map((r) => Number(r.ID));
  }

  async insertOutbound(text: string): Promise<number> {
    const [r] = await this.#pool.execute<mysql.ResultSetHeader>('INSERT INTO COUTMSGS (MSG_TEXT) VALUES (?)', [text]);
    return r.insertId;
  }

  async outboundExists(id: number): Promise<boolean> {
    const [rows] = await this.#pool.query<mysql.RowDataPacket[]>('SELECT 1 FROM COUTMSGS WHERE ID = ?', [id]);
    return rows.length > 0;
  }

  async findOutbound(fragments: string[], window: number): Promise<number | undefined> {
    // The newest rows by primary key, then the text match: bounded whatever the table's size.
    const [rows] = await this.#pool.query<mysql.RowDataPacket[]>(
      `SELECT ID FROM (SELECT ID, MSG_TEXT FROM COUTMSGS ORDER BY ID DESC LIMIT ?) t
       WHERE ${fragments.map(() => `MSG_TEXT LIKE ?`).join(' AND ')} ORDER BY ID LIMIT 1`,
      [window, ...fragments.map(likeContaining)],
    );
    return rows[0] ? Number(rows[0].ID) : undefined;
  }

  async ping(): Promise<void> {
    await this.#pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}

const toId = (r: mysql.RowDataPacket): MailboxId => ({
  id: Number(r.ID),
  receivedAt: r.DATE_RECEIVED as Date,
  processed: Number(r.P) === 1,
});

function splitStatements(sql: string): string[] {
  return sql
    .replace(/--.*$/gm, '')
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
}
