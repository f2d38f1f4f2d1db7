import type { Db, Queryable } from '../db/db.ts';
import { mailboxDdl } from './ddl.ts';
import type { BackfillMark, Mailbox, MailboxId, MailboxRow, MailboxText, MarkColumns } from './mailbox.ts';
import { clipNote, likeContaining, mailboxText } from './mailbox.ts';

/**
 * Inserts several inbound rows in the caller's transaction (the embedded ingress's group commit);
 * returns their IDs in the order of `texts` (IDs are drawn in that order).
 */
export async function insertInboundRows(q: Queryable, texts: string[]): Promise<number[]> {
  const r = await q.query<{ ID: number }>(
    `INSERT INTO "CMINMSGS" ("MSG_TEXT") SELECT u.t FROM unnest($1::text[]) WITH ORDINALITY AS u(t, n) ORDER BY u.n RETURNING "ID"`,
    [texts],
  );
  return r.rows.map((row) => row.ID).sort((a, b) => a - b);
}

/** The mailbox as upper-case tables in msgx's own PostgreSQL: the twin's default. */
export class PgMailbox implements Mailbox {
  readonly kind = 'pg' as const;

  #columns: Promise<MarkColumns> | undefined;

  constructor(private readonly db: Db) {}

  markColumns(): Promise<MarkColumns> {
    // The table the unqualified name resolves to (search_path), as every other statement here.
    this.#columns ??= this.db
      .query<{ c: string }>(
        `SELECT attname AS c FROM pg_attribute
         WHERE attrelid = to_regclass('"CMINMSGS"') AND attnum > 0 AND NOT attisdropped AND attname IN ('PROC_STATUS', 'PROC_NOTE')`,
      )
      .then((r) => ({ procStatus: r.rows.some((x) => x.c === 'PROC_STATUS'), procNote: r.rows.some((x) => x.c === 'PROC_NOTE') }))
      .catch((err: unknown) => {
        this.#columns = undefined;
        throw err;
      });
    return this.#columns;
  }

  /**
   * Twins starting together on one MSGX_PG_URL would race in CREATE TABLE IF NOT EXISTS (one
   * failing on a duplicate pg_type row): one at a time, under a transaction advisory lock.
   */
  async ensureTables(): Promise<void> {
    if (this.db.kind !== 'pg') return void (await this.db.query(mailboxDdl('pg')));
    await this.db.tx(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('msgx:mailbox-ddl'))`);
      await tx.query(mailboxDdl('pg'));
    });
  }

  async insertInbound(text: string): Promise<number> {
    const r = await this.db.query<{ ID: number }>(`INSERT INTO "CMINMSGS" ("MSG_TEXT") VALUES ($1) RETURNING "ID"`, [text]);
    return r.rows[0]!.ID;
  }

  async scanUnprocessed(afterId: number, limit: number, upTo = Number.MAX_SAFE_INTEGER): Promise<MailboxRow[]> {
    const r = await this.db.query<{ ID: number; DATE_RECEIVED: Date }>(
      `SELECT "ID", "DATE_RECEIVED" FROM "CMINMSGS" WHERE "DATE_PROCESSED" IS NULL AND "ID" > $1 AND "ID" <= $3
       ORDER BY "ID" LIMIT $2`,
      [afterId, limit, upTo],
    );
    return r.rows.map((row) => ({ id: Number(row.ID), receivedAt: row.DATE_RECEIVED }));
  }

  async scanIds(afterId: number, limit: number): Promise<MailboxId[]> {
    const r = await this.db.query<{ ID: number; DATE_RECEIVED: Date; P: boolean }>(
      `SELECT "ID", "DATE_RECEIVED", "DATE_PROCESSED" IS NOT NULL AS "P" FROM "CMINMSGS" WHERE "ID" > $1 ORDER BY "ID" LIMIT $2`,
      [afterId, limit],
    );
    return r.rows.map((row) => ({ id: Number(row.ID), receivedAt: row.DATE_RECEIVED, processed: row.P }));
  }

  async readRanges(ranges: [number, number][]): Promise<MailboxId[]> {
    if (ranges.length === 0) return [];
    const r = await this.db.query<{ ID: number; DATE_RECEIVED: Date; P: boolean }>(
      `SELECT m."ID", m."DATE_RECEIVED", m."DATE_PROCESSED" IS NOT NULL AS "P"
       FROM unnest($1::bigint[], $2::bigint[]) AS g(lo, hi) JOIN "CMINMSGS" m ON m."ID" BETWEEN g.lo AND g.hi ORDER BY m."ID"`,
      [ranges.map((x) => x[0]), ranges.map((x) => x[1])],
    );
    return r.rows.map((row) => ({ id: Number(row.ID), receivedAt: row.DATE_RECEIVED, processed: row.P }));
  }

  async readTexts(ids: number[]): Promise<Map<number, MailboxText>> {
    const out = new Map<number, MailboxText>();
    if (ids.length === 0) return out;
    // A UTF8 (or LATIN1, …) database validated the text when it was written and converts it to the
    // client's UTF-8. A SQL_ASCII database stores whatever bytes it was given and refuses to send
    // ones that are not UTF-8 as text (the whole read would fail, and with it every message of
    // the group): there the bytes are read as they are, and mailboxText() decides.
    const r = await this.db.query<{ ID: number; MSG_TEXT: string | null; RAW: Uint8Array | null }>(
      `SELECT "ID", CASE WHEN current_setting('server_encoding') = 'SQL_ASCII' THEN NULL ELSE "MSG_TEXT" END AS "MSG_TEXT",
              CASE WHEN current_setting('server_encoding') = 'SQL_ASCII' THEN convert_to("MSG_TEXT", 'SQL_ASCII') END AS "RAW"
       FROM "CMINMSGS" WHERE "ID" = ANY($1::bigint[])`,
      [ids],
    );
    for (const row of r.rows) {
      const value = row.MSG_TEXT ?? row.RAW;
      if (value !== null) out.set(Number(row.ID), mailboxText(value));
    }
    return out;
  }

  async markProcessed(marks: BackfillMark[]): Promise<void> {
    if (marks.length === 0) return;
    const cols = await this.markColumns();
    const set = [
      ...(cols.procStatus ? ['"PROC_STATUS" = v.status'] : []),
      ...(cols.procNote ? ['"PROC_NOTE" = v.note'] : []),
      '"DATE_PROCESSED" = v.at',
    ];
    await this.db.query(
      `UPDATE "CMINMSGS" m SET ${set.join(', ')}
       FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[]) AS v(id, status, note, at)
       WHERE m."ID" = v.id AND (m."DATE_PROCESSED" IS NULL${cols.procStatus ? ` OR m."PROC_STATUS" = 'DEAD'` : ''})`,
      [marks.map((m) => m.id), marks.map((m) => m.status), marks.map((m) => clipNote(m.note)), marks.map((m) => m.processedAt)],
    );
  }

  async filterUnprocessed(ids: number[]): Promise<number[]> {
    if (ids.length === 0) return [];
    const r = await this.db.query<{ ID: number }>(
      `SELECT "ID" FROM "CMINMSGS" WHERE "ID" = ANY($1::bigint[]) AND "DATE_PROCESSED" IS NULL ORDER BY "ID"`,
      [ids],
    );
    return r.rows.map((row) => row.ID);
  }

  async insertOutbound(text: string): Promise<number> {
    const r = await this.db.query<{ ID: number }>(`INSERT INTO "COUTMSGS" ("MSG_TEXT") VALUES ($1) RETURNING "ID"`, [text]);
    return r.rows[0]!.ID;
  }

  async outboundExists(id: number): Promise<boolean> {
    const r = await this.db.query(`SELECT 1 FROM "COUTMSGS" WHERE "ID" = $1`, [id]);
    return r.rowCount > 0;
  }

  async findOutbound(fragments: string[], window: number): Promise<number | undefined> {
    const r = await this.db.query<{ ID: number }>(
      `SELECT "ID" FROM (SELECT "ID", "MSG_TEXT" FROM "COUTMSGS" ORDER BY "ID" DESC LIMIT $1) t
       WHERE "MSG_TEXT" LIKE ALL ($2::text[]) ORDER BY "ID" LIMIT 1`,
      [window, fragments.map(likeContaining)],
    );
    return r.rows[0]?.ID;
  }

  async ping(): Promise<void> {
    await this.db.query('SELECT 1');
  }

  async close(): Promise<void> {
    // The database belongs to the caller; nothing of our own to close.
  }
}
