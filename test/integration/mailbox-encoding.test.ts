import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../lib/app/context.ts';
import { migrate } from '../../lib/db/migrate.ts';
import { PgDb } from '../../lib/db/pg.ts';
import type { Mailbox } from '../../lib/mailbox/mailbox.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { drainPoller, drainPump, makeContext, wire } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, serviceUrls, type TestMysql, type TestPg } from '../helpers/services.ts';
import { createEffectTables, testRegistry } from '../helpers/testProcessors.ts';

/**
 * Issue #11: not well-formed input is refused wherever it enters — also when it is already in a
 * mailbox row. Bytes that are not UTF-8 can only sit in a mailbox whose MSG_TEXT the database does
 * not decode: a binary column in MariaDB (LONGBLOB: the server validates every utf8mb4 write and
 * refuses or replaces bad bytes itself) and a PostgreSQL database in SQL_ASCII (which stores any
 * bytes). Such a row must end DEAD(MALFORMED) with a reason naming invalid UTF-8, never be decoded
 * with U+FFFD, never hold the FIFO; the rows behind it are processed. A column with a declared
 * single-byte character set (latin1) is text in that character set: é arrives as é.
 *
 * The model: what each row must end as is written down from the bytes the test inserted.
 */
const utf8 = (s: string) => Buffer.from(s, 'utf8');
const latin1 = (s: string) => Buffer.from(s, 'latin1');
const msg = (seqn: string, body = '') => wire({ TYPE: 'TEST', SEQN: seqn }, body);

interface Row {
  bytes: Buffer;
  /** The model: the row's outcome, and for a refused row the reason it must give. */
  want: { status: 'SUCCEEDED' } | { status: 'DEAD'; errorClass: 'MALFORMED'; reason: RegExp };
  /** The SEQN the test processor records when the message is applied. */
  applies?: string;
}

/** Where a byte that is not UTF-8 sits, found by the test itself (not by msgx's validator). */
function invalidAt(bytes: Buffer, bad: Buffer): string {
  const at = bytes.indexOf(bad);
  expect(at).toBeGreaterThan(0);
  const shown = [...bytes.subarray(at, at + 4)].map((b) => `0x${b.toString(16).toUpperCase().padStart(2, '0')}`).join(' ');
  return `MSG_TEXT is not valid UTF-8: bytes ${shown} at byte offset ${at}`;
}
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function rows(): Row[] {
  // A latin1 é inside an otherwise UTF-8 message: the commonest way such bytes get there.
  const latinInUtf8 = Buffer.concat([utf8(msg('e2', '<TEST><NOTE>caf')), Buffer.from([0xe9]), utf8('</NOTE></TEST>')]);
  // A sequence cut short at the very end (a text truncated in the middle of a character).
  const truncated = Buffer.concat([utf8(msg('e5')), Buffer.from([0xe2, 0x82])]);
  // A surrogate encoded in UTF-8 (CESU-8 style): not UTF-8 either.
  const surrogate = Buffer.concat([utf8(msg('e6', '<TEST><NOTE>')), Buffer.from([0xed, 0xa0, 0x80]), utf8('</NOTE></TEST>')]);
  return [
    { bytes: utf8(msg('e1')), want: { status: 'SUCCEEDED' }, applies: 'e1' },
    {
      bytes: latinInUtf8,
      want: { status: 'DEAD', errorClass: 'MALFORMED', reason: new RegExp(`^${escape(invalidAt(latinInUtf8, Buffer.from([0xe9])))}$`) },
    },
    // Two root elements, well-formed UTF-8: not well-formed XML.
    { bytes: utf8(`${msg('e3')}<MSG/>`), want: { status: 'DEAD', errorClass: 'MALFORMED', reason: /more than one root element/ } },
    // Real UTF-8 beyond ASCII is text: the processor records the SEQN exactly.
    { bytes: utf8(msg('e4-café-航班')), want: { status: 'SUCCEEDED' }, applies: 'e4-café-航班' },
    {
      bytes: truncated,
      want: { status: 'DEAD', errorClass: 'MALFORMED', reason: new RegExp(`^${escape(invalidAt(truncated, Buffer.from([0xe2, 0x82])))}$`) },
    },
    {
      bytes: surrogate,
      want: { status: 'DEAD', errorClass: 'MALFORMED', reason: new RegExp(`^${escape(invalidAt(surrogate, Buffer.from([0xed, 0xa0])))}$`) },
    },
    // The pipeline moves on past all of them.
    { bytes: utf8(msg('e7')), want: { status: 'SUCCEEDED' }, applies: 'e7' },
  ];
}

/** Inserts the rows' bytes as they are and runs poller and pump; judges every row by the model. */
async function runAndJudge(o: {
  pgdb: TestPg['db'];
  mailbox: Mailbox;
  insertBytes: (b: Buffer) => Promise<number>;
  /** The mailbox's own back-fill marks (PROC_STATUS, PROC_NOTE) by ID. */
  marks: () => Promise<Map<number, { status: string | null; note: string | null }>>;
}): Promise<void> {
  const model = rows();
  const ids: number[] = [];
  for (const r of model) ids.push(await o.insertBytes(r.bytes));
  const ctx: AppContext = makeContext({ db: o.pgdb, mailbox: o.mailbox, registry: testRegistry() });
  expect(await drainPoller(ctx)).toBe(model.length);
  expect((await drainPump(ctx)).kind).toBe('idle');

  const states = new Map(
    (
      await o.pgdb.query<{ msg_id: number; status: string; error_class: string | null; error_detail: string | null }>(
        `SELECT msg_id, status, error_class, error_detail FROM proc_state WHERE msg_id = ANY($1::bigint[])`,
        [ids],
      )
    ).rows.map((r) => [Number(r.msg_id), r]),
  );
  const marks = await o.marks();
  model.forEach((r, i) => {
    const id = ids[i]!;
    const got = states.get(id)!;
    expect(got.status, `row ${id}`).toBe(r.want.status);
    const mark = marks.get(id)!;
    expect(mark.status, `mailbox mark of ${id}`).toBe(r.want.status);
    if (r.want.status === 'DEAD') {
      expect(got.error_class, `row ${id}`).toBe(r.want.errorClass);
      expect(got.error_detail, `row ${id}`).toMatch(r.want.reason);
      // The mailbox owner reads the same reason in PROC_NOTE.
      expect(mark.note?.startsWith('MALFORMED: '), `mailbox note of ${id}: ${mark.note}`).toBe(true);
      expect(mark.note!.slice('MALFORMED: '.length), `mailbox note of ${id}`).toMatch(r.want.reason);
    } else expect(got.error_class).toBeNull();
  });
  // Exactly the good rows were applied, in mailbox order, each once.
  const applied = (await o.pgdb.query<{ seqn: string }>(`SELECT seqn FROM test_effect ORDER BY msg_id`)).rows.map((r) => r.seqn);
  expect(applied).toEqual(model.filter((r) => r.applies).map((r) => r.applies));
  // No copy msgx keeps of a refused row pretends to be the text: where bytes were bad it shows U+FFFD.
  const copies = await o.pgdb.query<{ msg_id: number; raw_text: string | null }>(
    `SELECT msg_id, raw_text FROM proc_state WHERE msg_id = ANY($1::bigint[])`,
    [ids],
  );
  for (const c of copies.rows) {
    const r = model[ids.indexOf(Number(c.msg_id))]!;
    if (r.want.status === 'DEAD' && r.want.reason.source.includes('UTF-8')) expect(c.raw_text).toContain('\uFFFD');
  }
}

describe('mailbox bytes that are not UTF-8 (MariaDB, MSG_TEXT declared LONGBLOB)', () => {
  let pgt: TestPg;
  let my: TestMysql;
  afterAll(async () => {
    await my?.drop();
    await pgt?.drop();
  });

  it('ends such rows DEAD(MALFORMED) naming invalid UTF-8 and the offset; two roots DEAD(MALFORMED); the rows behind are processed', async () => {
    pgt = await freshPg();
    await createEffectTables(pgt.db);
    my = await freshMysql();
    // The owner's mailbox keeps the bytes it was given: MSG_TEXT is binary.
    await my.query('ALTER TABLE CMINMSGS MODIFY MSG_TEXT LONGBLOB');
    await runAndJudge({
      pgdb: pgt.db,
      mailbox: my.mailbox,
      insertBytes: async (b) => (await my.query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [b])).insertId,
      marks: async () => {
        const r = await my.query<mysql.RowDataPacket[]>('SELECT ID, PROC_STATUS, PROC_NOTE FROM CMINMSGS');
        return new Map(r.map((x) => [Number(x.ID), { status: x.PROC_STATUS as string | null, note: x.PROC_NOTE as string | null }]));
      },
    });
  });
});

describe('mailbox bytes that are not UTF-8 (PostgreSQL mailbox in a SQL_ASCII database)', () => {
  const name = `msgx_t_ascii_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  const admin = () => new pg.Client({ connectionString: serviceUrls().pgUrl });
  let db: PgDb | undefined;
  afterAll(async () => {
    await db?.close();
    const c = admin();
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
  });

  it('ends such rows DEAD(MALFORMED) instead of failing the mailbox read for the whole group (which held the head for ever)', async () => {
    const c = admin();
    await c.connect();
    await c.query(`CREATE DATABASE ${name} ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'`);
    await c.end();
    const url = new URL(serviceUrls().pgUrl);
    url.pathname = `/${name}`;
    db = new PgDb(url.toString(), { max: 5 });
    await migrate(db);
    await createEffectTables(db);
    // The twin's mailbox variant: the tables in msgx's own database.
    const mailbox = new PgMailbox(db);
    await mailbox.ensureTables();
    await runAndJudge({
      pgdb: db,
      mailbox,
      // Another system writing bytes: SQL_ASCII takes them as they are.
      insertBytes: async (b) =>
        Number(
          (
            await db!.query<{ ID: string }>(
              `INSERT INTO "CMINMSGS" ("MSG_TEXT") VALUES (convert_from($1::bytea, 'SQL_ASCII')) RETURNING "ID"`,
              [b],
            )
          ).rows[0]!.ID,
        ),
      marks: async () => {
        const r = await db!.query<{ ID: string; PROC_STATUS: string | null; PROC_NOTE: string | null }>(
          `SELECT "ID", "PROC_STATUS", convert_to("PROC_NOTE", 'SQL_ASCII') AS "PROC_NOTE" FROM "CMINMSGS"`,
        );
        // PROC_NOTE read as bytes too: the note msgx wrote is UTF-8 (it names the bytes in hex).
        return new Map(
          r.rows.map((x) => [
            Number(x.ID),
            { status: x.PROC_STATUS, note: x.PROC_NOTE === null ? null : Buffer.from(x.PROC_NOTE).toString('utf8') },
          ]),
        );
      },
    });
  });
});

describe('a mailbox column declared latin1 (MariaDB)', () => {
  let pgt: TestPg;
  let my: TestMysql;
  afterAll(async () => {
    await my?.drop();
    await pgt?.drop();
  });

  it('is text in latin1: an é written by a latin1 client or a utf8mb4 client arrives as é and is processed', async () => {
    pgt = await freshPg();
    await createEffectTables(pgt.db);
    my = await freshMysql();
    await my.query('ALTER TABLE CMINMSGS MODIFY MSG_TEXT LONGTEXT CHARACTER SET latin1');
    const latinClient = await mysql.createConnection({ uri: my.url, charset: 'latin1_swedish_ci' });
    try {
      // A latin1 writer sends the byte E9 for é; a utf8mb4 writer sends C3 A9 and the server converts it.
      await latinClient.query('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [latin1(msg('l1-café'))]);
      await my.query('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [msg('l2-café')]);
    } finally {
      await latinClient.end();
    }
    const ctx = makeContext({ db: pgt.db, mailbox: my.mailbox, registry: testRegistry() });
    expect(await drainPoller(ctx)).toBe(2);
    expect((await drainPump(ctx)).kind).toBe('idle');
    const applied = (await pgt.db.query<{ seqn: string }>(`SELECT seqn FROM test_effect ORDER BY msg_id`)).rows.map((r) => r.seqn);
    expect(applied).toEqual(['l1-café', 'l2-café']);
  });
});
