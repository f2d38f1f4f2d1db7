import mysql from 'mysql2/promise';
import { mailboxDdl } from './ddl.ts';
import type { BackfillMark, Mailbox, MailboxId, MailboxRow, MailboxText } from './mailbox.ts';
import { clipNote, likeContaining, mailboxText } from './mailbox.ts';
import { type MysqlPoolOptions, refreshingPool } from './mysqlPool.ts';

export class MysqlMailbox implements Mailbox {
  readonly kind = 'mysql' as const;
  readonly #pool: Pick<mysql.Pool, 'query' | 'execute' | 'end'>;

  /** TLS and credential refresh: see mysqlPool.ts. */
  constructor(url: string, options: MysqlPoolOptions = {}) {
    this.#pool = refreshingPool(url, options);
  }

  /** Twin only: create CMINMSGS/COUTMSGS when missing. The cloud never touches the owner's DDL. */
  async ensureTables(): Promise<void> {
    for (const stmt of splitStatements(mailboxDdl('mysql'))) await this.#pool.query(stmt);
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
    // One round trip per batch: a CASE per column keeps each row's own status and note.
    const ids = marks.map((m) => m.id);
    const params: unknown[] = [];
    const whenStatus = marks.map((m) => (params.push(m.id, m.status), 'WHEN ? THEN ?')).join(' ');
    const whenNote = marks.map((m) => (params.push(m.id, clipNote(m.note)), 'WHEN ? THEN ?')).join(' ');
    const whenAt = marks.map((m) => (params.push(m.id, m.processedAt), 'WHEN ? THEN ?')).join(' ');
    params.push(ids);
    await this.#pool.query(
      `UPDATE CMINMSGS SET PROC_STATUS = CASE ID ${whenStatus} END, PROC_NOTE = CASE ID ${whenNote} END,
         DATE_PROCESSED = CASE ID ${whenAt} END
       WHERE ID IN (?) AND (DATE_PROCESSED IS NULL OR PROC_STATUS = 'DEAD')`,
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
