import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import mysql from 'mysql2/promise';
import pgLib from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerFlightProcessors } from '../../lib/flights/processors.ts';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { pollerRole, pumpRole, sweepRole } from '../../lib/jobs/roles.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { backfillSweep } from '../../lib/pipeline/backfill.ts';
import type { Mailbox } from '../../lib/mailbox/mailbox.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { ProcessorRegistry } from '../../lib/pipeline/processor.ts';
import { rescanOnce } from '../../lib/pipeline/rescan.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { makeContext } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, type TestMysql, type TestPg, waitFor } from '../helpers/services.ts';

/**
 * Strict FIFO by mailbox ID (docs/ordering.md), end to end: the real poller, pump and sweep
 * roles, the real HTTP ingress, the real mailbox (MariaDB or PostgreSQL), inserts held open on a
 * second connection. Judged by a model built here: each flight's gate is the one of the last
 * committed change in mailbox-ID order (rows processed late, after their hole, apply last), every
 * committed row ends back-filled in the mailbox, and holes are counted.
 */
const GRACE_MS = 1500;
/** "Long after the grace, beyond the old look-back window": a hold well past the grace. */
const LATE_HOLD_MS = Number(process.env.TEST_LATE_HOLD_MS ?? GRACE_MS * 2 + 500);
const BACKLOG = 600; // more than the claim batch, and than the old 500-ID look-back

for (const kind of ['mysql', 'pg'] as const) {
  describe(`strict FIFO by mailbox ID (mailbox in ${kind})`, () => {
    let pg: TestPg;
    let my: TestMysql | undefined;
    let mailbox: Mailbox;
    let ctx: AppContext;
    let server: Server;
    let base: string;
    const stop = new AbortController();
    let workers: Promise<unknown>[] = [];
    let seqn = 1;
    /** The model: every change sent, with its mailbox ID once known. */
    const changes: { id: number; flid: string; gate: string; late?: boolean }[] = [];
    const flids = ['7001', '7002', '7003', '7004', '7005'];

    beforeAll(async () => {
      pg = await freshPg();
      if (kind === 'mysql') {
        my = await freshMysql();
        mailbox = my.mailbox;
      } else {
        mailbox = new PgMailbox(pg.db);
        await (mailbox as PgMailbox).ensureTables();
      }
      ctx = makeContext({
        db: pg.db,
        mailbox,
        clock: systemClock,
        registry: registerFlightProcessors(new ProcessorRegistry()),
        env: { MSGX_GAP_GRACE: `${GRACE_MS}ms`, MSGX_POLL_INTERVAL_MS: '200', MSGX_CLAIM_BATCH: '20', MSGX_LOG_LEVEL: 'SILENT' },
      });
      server = await startHttpServer(ctx, buildRouter(), { port: 0 });
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const sweep = sweepRole(ctx, [
        { name: 'backfill', everyMs: 500, run: (c) => backfillSweep(c) },
        { name: 'mailbox-rescan', everyMs: 1000, run: (c) => rescanOnce(c) },
      ]);
      workers = [pollerRole(ctx), pumpRole(ctx), sweep].map((role) => runWorker(ctx, { ...role, signal: stop.signal }));
      // The flights every later change moves between gates.
      await insertDirect([
        schd('DNLD', {
          seqn: seqn++,
          dttm: '20261130060000',
          opdy: '20261130',
          flights: flids.map((id) => flight({ FLID: id, OPDY: '20261130', AWCD: 'CZ', FLNO: id, STAT: 'SCH', GATE: gate('B0') })),
        }),
      ]);
      await settled();
    }, 60_000);

    afterAll(async () => {
      stop.abort();
      await Promise.allSettled(workers);
      server?.close();
      await my?.drop();
      await pg?.drop();
    });

    const gate = (code: string) => [{ CODE: code, BEG: '20261130100000', END: '20261130103000' }];
    const move = (flid: string, code: string) => flop('GATE', { seqn: seqn++ }, flight({ FLID: flid, GATE: gate(code) }));

    /** Other systems' writes: straight into CMINMSGS, one multi-row INSERT (consecutive IDs). */
    async function insertDirect(texts: string[]): Promise<number[]> {
      if (kind === 'mysql') {
        const [r] = await (await conn()).query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES ?', [texts.map((t) => [t])]);
        return texts.map((_, i) => r.insertId + i);
      }
      const r = await pg.db.query<{ ID: string }>(
        `INSERT INTO "CMINMSGS" ("MSG_TEXT") SELECT t FROM unnest($1::text[]) WITH ORDINALITY AS x(t, n) ORDER BY n RETURNING "ID"`,
        [texts],
      );
      return r.rows.map((x) => Number(x.ID)).sort((a, b) => a - b);
    }
    async function moveDirect(moves: [string, string][]): Promise<void> {
      const ids = await insertDirect(moves.map(([f, g]) => move(f, g)));
      moves.forEach(([flid, g], i) => changes.push({ id: ids[i]!, flid, gate: g }));
    }
    async function moveHttp(flid: string, code: string): Promise<number> {
      const res = await fetch(`${base}/cminmsgs/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/xml' },
        body: move(flid, code),
      });
      expect(res.status).toBe(200);
      const id = Number(await res.text());
      changes.push({ id, flid, gate: code });
      return id;
    }

    let rawConn: mysql.Connection | undefined;
    async function conn(): Promise<mysql.Connection> {
      rawConn ??= await mysql.createConnection({ uri: my!.url, timezone: 'Z' });
      return rawConn;
    }

    /** An insert on a connection of its own, inside a transaction held open until commit/rollback. */
    async function holdInsert(text: string): Promise<{ id: number; commit(): Promise<void>; rollback(): Promise<void> }> {
      if (kind === 'mysql') {
        const c = await mysql.createConnection({ uri: my!.url, timezone: 'Z' });
        await c.query('BEGIN');
        const [r] = await c.query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [text]);
        const end = async (sql: string) => {
          await c.query(sql);
          await c.end();
        };
        return { id: r.insertId, commit: () => end('COMMIT'), rollback: () => end('ROLLBACK') };
      }
      const c = new pgLib.Client({ connectionString: pg.url });
      await c.connect();
      await c.query('BEGIN');
      const r = await c.query<{ ID: string }>(`INSERT INTO "CMINMSGS" ("MSG_TEXT") VALUES ($1) RETURNING "ID"`, [text]);
      const end = async (sql: string) => {
        await c.query(sql);
        await c.end();
      };
      return { id: Number(r.rows[0]!.ID), commit: () => end('COMMIT'), rollback: () => end('ROLLBACK') };
    }

    const api = async <T>(path: string): Promise<T> => {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(200);
      return (await res.json()) as T;
    };
    const stats = () =>
      api<{ ordering: { holesDeclared: number; lateRows: number; gapsWaiting: number } }>('/admin/stats').then((s) => s.ordering);
    const gateOf = async (flid: string) =>
      (await api<{ GATE: { CODE: string }[] }>(`/v1/flights/${flid}`)).GATE.map((g) => g.CODE).join(',');

    /** Every committed mailbox row back-filled (read from the mailbox, not from msgx). */
    async function settled(): Promise<void> {
      const unprocessed = async () => {
        if (kind === 'mysql')
          return (await my!.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM CMINMSGS WHERE DATE_PROCESSED IS NULL'))[0]!.n;
        return Number((await pg.db.query<{ n: string }>(`SELECT count(*) AS n FROM "CMINMSGS" WHERE "DATE_PROCESSED" IS NULL`)).rows[0]!.n);
      };
      await waitFor(async () => (await unprocessed()) === 0, { timeoutMs: 60_000, what: 'every committed mailbox row processed' });
    }

    /** The model's expected gate per flight: changes in mailbox-ID order, late ones after. */
    function expectedGates(): Record<string, string> {
      const out: Record<string, string> = Object.fromEntries(flids.map((f) => [f, 'B0']));
      const inOrder = changes.filter((c) => !c.late).sort((a, b) => a.id - b.id);
      for (const c of [...inOrder, ...changes.filter((c) => c.late)]) out[c.flid] = c.gate;
      return out;
    }
    async function expectModel(): Promise<void> {
      await settled();
      const expected = expectedGates();
      const actual: Record<string, string> = {};
      for (const f of flids) actual[f] = await gateOf(f);
      expect(actual).toEqual(expected);
      // Terminal and back-filled with a status, row by row, as the mailbox's owner sees it.
      const ids = changes.map((c) => c.id);
      const statuses =
        kind === 'mysql'
          ? (await my!.query<{ ID: number; PROC_STATUS: string }[]>('SELECT ID, PROC_STATUS FROM CMINMSGS WHERE ID IN (?)', [ids])).map(
              (r) => r.PROC_STATUS,
            )
          : (
              await pg.db.query<{ PROC_STATUS: string }>(`SELECT "PROC_STATUS" FROM "CMINMSGS" WHERE "ID" = ANY($1::bigint[])`, [ids])
            ).rows.map((r) => r.PROC_STATUS);
      expect(statuses).toHaveLength(ids.length);
      expect(new Set(statuses)).toEqual(new Set(['SUCCEEDED']));
    }

    it('a row held open while newer rows for the same flight commit is applied before them', async () => {
      const before = await stats();
      const held = await holdInsert(move('7001', 'L1'));
      changes.push({ id: held.id, flid: '7001', gate: 'L1' });
      await moveDirect(Array.from({ length: 30 }, (_, i) => ['7001', `N${i}`] as [string, string]));
      await moveHttp('7001', 'H1');
      // The other writer commits once msgx shows it waits on the gap its open row leaves (within the grace).
      await waitFor(async () => (await stats()).gapsWaiting > before.gapsWaiting, { timeoutMs: 30_000, what: 'msgx waiting on the gap' });
      await held.commit();
      await expectModel();
      const after = await stats();
      expect(after.holesDeclared - before.holesDeclared).toBe(0);
      expect(after.lateRows - before.lateRows).toBe(0);
    }, 120_000);

    it('bulk mailbox inserts interleaved with HTTP posts: the highest ID wins whatever the entry path', async () => {
      for (let round = 0; round < 4; round++) {
        const bulk = moveDirect(Array.from({ length: 100 }, (_, i) => [flids[(i + round) % 2]!, `D${round}-${i}`] as [string, string]));
        const posts = Promise.all([moveHttp('7002', `H${round}a`), moveHttp('7001', `H${round}b`)]);
        await Promise.all([bulk, posts]);
      }
      // Issue #11's case, with the pipeline idle: many rows straight into the mailbox (the last
      // moves 7002 to M), then one HTTP post moving it to H: the post has the higher ID and must win.
      await settled();
      await moveDirect(Array.from({ length: 400 }, (_, i) => [i === 399 ? '7002' : '7001', i === 399 ? 'M' : `P${i}`] as [string, string]));
      await moveHttp('7002', 'H');
      await expectModel();
      expect(await gateOf('7002')).toBe('H');
    }, 120_000);

    it('a row committed long after the grace, under a backlog larger than the claim batch, is processed late and counted', async () => {
      const before = await stats();
      await moveDirect([['7003', 'E3']]);
      const held = await holdInsert(move('7003', 'LATE'));
      // The backlog moves other flights only, so the late row's place in the order is unambiguous.
      await moveDirect(Array.from({ length: BACKLOG }, (_, i) => [flids[3 + (i % 2)]!, `B${i}`] as [string, string]));
      await waitFor(async () => (await stats()).holesDeclared > before.holesDeclared, { timeoutMs: 30_000, what: 'the hole declared' });
      await new Promise((r) => setTimeout(r, Math.max(0, LATE_HOLD_MS - GRACE_MS)));
      await held.commit();
      changes.push({ id: held.id, flid: '7003', gate: 'LATE', late: true });
      await expectModel();
      const after = await stats();
      expect(after.holesDeclared - before.holesDeclared).toBe(1);
      expect(after.lateRows - before.lateRows).toBe(1);
      const trace = await api<{ message: { status: string; late: { via: string } | null } }>(`/admin/trace/${held.id}`);
      expect(trace.message.status).toBe('SUCCEEDED');
      expect(trace.message.late).not.toBeNull();
    }, 180_000);

    it('a rolled-back insert is a permanent hole: counted once, and the rows after it are processed after the grace', async () => {
      const before = await stats();
      const held = await holdInsert(move('7005', 'NEVER'));
      await moveDirect([['7005', 'R1']]);
      await moveHttp('7005', 'R2');
      await held.rollback();
      await expectModel();
      const after = await stats();
      expect(after.holesDeclared - before.holesDeclared).toBe(1);
      expect(after.lateRows - before.lateRows).toBe(0);
      expect(after.gapsWaiting).toBe(0);
    }, 120_000);
  });
}
