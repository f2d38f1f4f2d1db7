import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { freshPg, serviceUrls, type TestPg, waitFor } from '../helpers/services.ts';
import { killTwins, startTwin, type Twin } from '../helpers/twinChild.ts';

/**
 * Journey: the mailbox's owner agreed only to the "processed" marker. Its CMINMSGS has
 * ID, MSG_TEXT, DATE_RECEIVED and DATE_PROCESSED — no PROC_STATUS, no PROC_NOTE. Another system
 * INSERTs a day plan, FLOPs and a message without META; msgx must process them all, set
 * DATE_PROCESSED on every row, and report no failure. Judged from outside: the flights over HTTP
 * against a model built here, the owner's own table, and the twin's log.
 *
 * Caught when markProcessed() writes PROC_STATUS/PROC_NOTE regardless (every back-fill fails,
 * DATE_PROCESSED stays NULL, the log says "mailbox backfill failed").
 */
const DAY = '20261129';
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  killTwins();
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

/** The owner's table on each engine: only the agreed columns. */
const OWNER_DDL = {
  mysql: `CREATE TABLE CMINMSGS (ID BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, MSG_TEXT LONGTEXT CHARACTER SET utf8mb4,
    DATE_RECEIVED DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), DATE_PROCESSED DATETIME(3) NULL DEFAULT NULL)`,
  pg: `CREATE TABLE "CMINMSGS" ("ID" bigserial PRIMARY KEY, "MSG_TEXT" text,
    "DATE_RECEIVED" timestamptz NOT NULL DEFAULT now(), "DATE_PROCESSED" timestamptz DEFAULT NULL)`,
};

interface OwnerSide {
  env: Record<string, string>;
  insert(text: string): Promise<number>;
  /** ID → DATE_PROCESSED set? */
  processed(): Promise<Map<number, boolean>>;
}

async function mysqlOwner(pgDb: TestPg): Promise<OwnerSide> {
  const { mailboxUrl } = serviceUrls();
  const name = `msgx_cols_${Date.now().toString(36)}`;
  const admin = await mysql.createConnection({ uri: mailboxUrl });
  await admin.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4`);
  await admin.end();
  const u = new URL(mailboxUrl);
  u.pathname = `/${name}`;
  const conn = await mysql.createConnection({ uri: u.toString() });
  await conn.query(OWNER_DDL.mysql);
  cleanups.push(async () => {
    await conn.query(`DROP DATABASE IF EXISTS ${name}`);
    await conn.end();
  });
  return {
    env: { MSGX_PG_URL: pgDb.url, MSGX_MAILBOX_URL: u.toString() },
    async insert(text) {
      const [r] = await conn.query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [text]);
      return r.insertId;
    },
    async processed() {
      const [rows] = await conn.query<mysql.RowDataPacket[]>('SELECT ID, DATE_PROCESSED IS NOT NULL AS P FROM CMINMSGS');
      return new Map(rows.map((r) => [Number(r.ID), Number(r.P) === 1]));
    },
  };
}

async function pgOwner(pgDb: TestPg): Promise<OwnerSide> {
  // The mailbox as tables in msgx's PostgreSQL database (MSGX_PG_URL alone), created by the owner first.
  const c = new pg.Client({ connectionString: pgDb.url });
  await c.connect();
  await c.query(OWNER_DDL.pg);
  cleanups.push(() => c.end());
  return {
    env: { MSGX_PG_URL: pgDb.url },
    async insert(text) {
      const r = await c.query<{ ID: string }>(`INSERT INTO "CMINMSGS" ("MSG_TEXT") VALUES ($1) RETURNING "ID"`, [text]);
      return Number(r.rows[0]!.ID);
    },
    async processed() {
      const r = await c.query<{ ID: string; P: boolean }>(`SELECT "ID", "DATE_PROCESSED" IS NOT NULL AS "P" FROM "CMINMSGS"`);
      return new Map(r.rows.map((x) => [Number(x.ID), x.P]));
    },
  };
}

describe.each([
  ['MySQL', mysqlOwner],
  ['PostgreSQL', pgOwner],
] as const)('a %s mailbox without PROC_STATUS and PROC_NOTE', (_engine, makeOwner) => {
  let twin: Twin;
  let owner: OwnerSide;

  it('processes every message, back-fills DATE_PROCESSED and reports no failure', { timeout: 240_000 }, async () => {
    const pgDb = await freshPg({ migrate: false });
    cleanups.push(() => pgDb.drop());
    owner = await makeOwner(pgDb);
    twin = await startTwin({ ...owner.env, MSGX_TIMEZONE: 'UTC' }, mkdtempSync(join(tmpdir(), 'msgx-cols-')));
    cleanups.push(async () => void (await twin.stop('SIGTERM', { killAfterMs: 10_000 })));

    // The model: two planned flights, then one FLOP each; one message without META (dead on arrival).
    const model: Record<string, Record<string, string>> = {
      '7001': { FLID: '7001', OPDY: DAY, FLNO: '7001', STAT: 'SCH' },
      '7002': { FLID: '7002', OPDY: DAY, FLNO: '7002', STAT: 'SCH' },
    };
    const ids: number[] = [];
    ids.push(
      await owner.insert(
        schd('DNLD', {
          seqn: 'c1',
          dttm: `${DAY}060000`,
          opdy: DAY,
          flights: Object.values(model).map((f) => flight({ ...f, AWCD: 'CZ' })),
        }),
      ),
    );
    ids.push(await owner.insert('<MSG><BODY>no meta</BODY></MSG>'));
    ids.push(await owner.insert(flop('ETOT', { seqn: 'c2', dttm: `${DAY}070000` }, flight({ FLID: '7001', ETOT: `${DAY}101000` }))));
    ids.push(await owner.insert(flop('UPDT', { seqn: 'c3', dttm: `${DAY}070100` }, flight({ FLID: '7002', XREM: 'owner columns' }))));
    model['7001']!.ETOT = `${DAY}101000`;
    model['7002']!.XREM = 'owner columns';

    await waitFor(async () => [...(await owner.processed()).values()].filter(Boolean).length === ids.length, {
      timeoutMs: 60_000,
      what: 'every mailbox row to be marked processed',
    });
    expect([...(await owner.processed()).entries()].sort((a, b) => a[0] - b[0])).toEqual(ids.map((id) => [id, true]));
    for (const [flid, fields] of Object.entries(model)) {
      const res = await fetch(`${twin.base}/v1/flights/${flid}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ ...fields, stateVersion: 2 });
    }
    // No back-fill failed, so nothing is owed and no alarm's gauge rises.
    expect(twin.output()).not.toMatch(/backfill failed|Unknown column|does not exist/);
    // The start log named what msgx writes.
    expect(twin.output()).toMatch(/mailbox back-fill columns[^\n]*no PROC_STATUS, PROC_NOTE: not written/);
  });
});
