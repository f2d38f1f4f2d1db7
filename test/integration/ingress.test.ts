import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db, Queryable } from '../../lib/db/db.ts';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { MAILBOX_CHANNEL } from '../../lib/pipeline/poller.ts';
import { PgDb } from '../../lib/db/pg.ts';
import { pollerRole, pumpRole } from '../../lib/jobs/roles.ts';
import { INBOX_CHANNEL } from '../../lib/pipeline/procState.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { drainPoller, drainPump, makeContext, wire } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, type TestMysql, type TestPg } from '../helpers/services.ts';

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** POST /cminmsgs/send over real HTTP: bad input is refused with a reason and nothing is stored. */
describe('ingress over HTTP', () => {
  let pg: TestPg;
  let my: TestMysql;
  let ctx: AppContext;
  let server: Server;
  let base: string;

  beforeAll(async () => {
    pg = await freshPg();
    my = await freshMysql();
    ctx = makeContext({ db: pg.db, mailbox: my.mailbox, clock: systemClock, env: { MSGX_MAX_BODY_BYTES: '4096' } });
    server = await startHttpServer(ctx, buildRouter(), { port: 0 });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.close();
    await my.drop();
    await pg.drop();
  });

  const send = (body: string, type = 'application/xml') =>
    fetch(`${base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': type }, body });
  const mailboxCount = async () => (await my.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM CMINMSGS'))[0]!.n;
  /** Everything a request could have stored: mailbox rows and processing rows. */
  const stored = async () => ({
    mailbox: await mailboxCount(),
    procState: (await pg.db.query<{ n: number }>('SELECT count(*)::int AS n FROM proc_state')).rows[0]!.n,
  });

  it('stores, wakes the poller and answers 200 text/plain with the mailbox ID', async () => {
    const woken: string[] = [];
    const unlisten = await pg.db.listen(MAILBOX_CHANNEL, (payload) => woken.push(String(payload)));
    try {
      for (const type of ['application/xml', 'text/xml; charset=utf-8', 'text/plain']) {
        const res = await send(wire({ TYPE: 'LDM', SEQN: type }), type);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
        const id = Number(await res.text());
        expect(Number.isInteger(id) && id > 0).toBe(true);
        const stored = await my.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM CMINMSGS WHERE ID = ?', [id]);
        expect(stored[0]!.n).toBe(1);
        // The row goes through the poller (docs/ordering.md): the ingress only wakes it.
        await until(() => woken.includes(String(id)));
        await drainPoller(ctx);
        const row = await pg.db.query(`SELECT status FROM proc_state WHERE msg_id = $1`, [id]);
        expect(row.rows[0]).toEqual({ status: 'PENDING' });
      }
    } finally {
      await unlisten();
    }
  });

  it('sends the poller NOTIFY only when no poller of this process holds the lock', async () => {
    // Another process's view of the channel: a pool of its own, so nothing here is delivered locally.
    const other = new PgDb(pg.url, { max: 1 });
    const heard: string[] = [];
    const unlisten = await other.listen(MAILBOX_CHANNEL, (payload) => heard.push(payload));
    // NOTIFYs arrive in commit order: once a marker sent after the send arrives, the send's NOTIFY would have.
    const heardUpToMarker = async (marker: string) => {
      await other.query(`SELECT pg_notify($1, $2)`, [MAILBOX_CHANNEL, marker]);
      await until(() => heard.includes(marker));
      return heard.filter((p) => p !== marker);
    };
    const stop = new AbortController();
    // The twin's poller in this process, resting far longer than the test: only a wake moves it.
    const pollCtx = makeContext({ db: pg.db, mailbox: my.mailbox, clock: systemClock, env: { MSGX_POLL_INTERVAL_MS: '600000' } });
    const worker = runWorker(pollCtx, { ...pollerRole(pollCtx), signal: stop.signal });
    try {
      const enqueued = async (id: number) => (await pg.db.query(`SELECT 1 FROM proc_state WHERE msg_id = $1`, [id])).rowCount === 1;
      // Wait until the worker holds the lock and listens: its first poll finds earlier rows.
      const first = Number(await (await send(wire({ TYPE: 'LDM', SEQN: 'lock-1' }))).text());
      for (let i = 0; !(await enqueued(first)); i++) {
        if (i > 500) throw new Error('the poller never enqueued the first row');
        await new Promise((r) => setTimeout(r, 10));
      }
      await heardUpToMarker('marker-0'); // whatever was sent before, the first row's NOTIFY included
      heard.length = 0;
      const id = Number(await (await send(wire({ TYPE: 'LDM', SEQN: 'lock-2' }))).text());
      for (let i = 0; !(await enqueued(id)); i++) {
        if (i > 500) throw new Error('the local poller was not woken');
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(await heardUpToMarker('marker-1')).toEqual([]);
      stop.abort();
      expect((await worker).acquired).toBe(true);
      // No poller here any more: the next send wakes whichever process polls.
      heard.length = 0;
      const next = Number(await (await send(wire({ TYPE: 'LDM', SEQN: 'lock-3' }))).text());
      expect(await heardUpToMarker('marker-2')).toEqual([String(next)]);
    } finally {
      stop.abort();
      await worker;
      await unlisten();
      await other.close();
    }
  });

  it('the poller NOTIFYs the pump only when no pump of this process holds the lock', async () => {
    const other = new PgDb(pg.url, { max: 1 });
    const heard: string[] = [];
    const unlisten = await other.listen(INBOX_CHANNEL, (payload) => heard.push(payload));
    const heardUpToMarker = async (marker: string) => {
      await other.query(`SELECT pg_notify($1, $2)`, [INBOX_CHANNEL, marker]);
      await until(() => heard.includes(marker));
      return heard.filter((p) => p !== marker);
    };
    const stop = new AbortController();
    const pumpCtx = makeContext({ db: pg.db, mailbox: my.mailbox, clock: systemClock, env: { MSGX_POLL_INTERVAL_MS: '600000' } });
    const worker = runWorker(pumpCtx, { ...pumpRole(pumpCtx), signal: stop.signal });
    const status = async (id: number) =>
      (await pg.db.query<{ status: string }>(`SELECT status FROM proc_state WHERE msg_id = $1`, [id])).rows[0]?.status;
    const settled = async (id: number) => {
      for (let i = 0; (await status(id)) !== 'SKIPPED'; i++) {
        if (i > 500) throw new Error(`message ${id} was not processed`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    try {
      // The pump's first step finds this row, whenever it holds the lock: then it listens.
      const first = await my.mailbox.insertInbound(wire({ TYPE: 'LDM', SEQN: 'inbox-1' }));
      await drainPoller(pumpCtx);
      await settled(first);
      await heardUpToMarker('marker-0'); // whatever was sent before, the first row's NOTIFY included
      heard.length = 0;
      // Woken in-process by the poller's enqueue, with no NOTIFY sent.
      const id = await my.mailbox.insertInbound(wire({ TYPE: 'LDM', SEQN: 'inbox-2' }));
      await drainPoller(pumpCtx);
      await settled(id);
      expect(await heardUpToMarker('marker-1')).toEqual([]);
      stop.abort();
      await worker;
      heard.length = 0;
      await my.mailbox.insertInbound(wire({ TYPE: 'LDM', SEQN: 'inbox-3' }));
      await drainPoller(pumpCtx);
      expect(await heardUpToMarker('marker-2')).toHaveLength(1);
    } finally {
      stop.abort();
      await worker;
      await unlisten();
      await other.close();
    }
  });

  it.each([
    ['an empty body', '', 400, /empty/],
    ['XML that is not well-formed', '<MSG><META></MSG>', 400, /not well-formed/],
    ['two root elements', '<MSG><META><SNDR>F</SNDR><SEQN>1</SEQN><TYPE>LDM</TYPE></META></MSG><MSG/>', 400, /more than one root element/],
    ['a DOCTYPE', '<!DOCTYPE MSG [<!ENTITY x "y">]><MSG/>', 400, /DOCTYPE/],
    ['a body over the size limit', `<MSG>${'x'.repeat(5000)}</MSG>`, 413, /larger than 4096 bytes/],
  ])('refuses %s with a JSON reason and stores nothing', async (_what, body, status, reason) => {
    const before = await stored();
    const res = await send(body);
    expect(res.status).toBe(status);
    const json = (await res.json()) as { error: string; detail: string };
    expect(json.detail).toMatch(reason);
    expect(json.error).toBeTruthy();
    expect(await stored()).toEqual(before);
  });

  it('refuses a content type that is not XML or text', async () => {
    const before = await stored();
    // Well-formed XML sent with the wrong type: refused for the type alone, nothing stored.
    const res = await send(wire({ TYPE: 'LDM', SEQN: 'json' }), 'application/json');
    expect(res.status).toBe(415);
    expect(((await res.json()) as { detail: string }).detail).toMatch(/application\/json is not accepted/);
    expect(await stored()).toEqual(before);
  });

  it('answers unknown routes 404 and wrong methods 405, as JSON', async () => {
    expect((await fetch(`${base}/nope`)).status).toBe(404);
    const res = await fetch(`${base}/cminmsgs/send`);
    expect(res.status).toBe(405);
    expect(await res.json()).toMatchObject({ error: 'method_not_allowed' });
  });

  it('refuses a body that is not valid UTF-8 with a JSON reason and stores nothing', async () => {
    const before = await mailboxCount();
    const bytes = Buffer.concat([
      Buffer.from('<MSG><META><SNDR>F</SNDR><SEQN>u8</SEQN><TYPE>LDM</TYPE></META><X>'),
      Buffer.from([0xc3, 0x28, 0xff]),
      Buffer.from('</X></MSG>'),
    ]);
    const res = await fetch(`${base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: bytes });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { detail: string }).detail).toMatch(/not valid UTF-8/);
    expect(await mailboxCount()).toBe(before);
  });

  it('when the enqueue fails after the mailbox insert, the message is not lost: the poller enqueues it', async () => {
    const failEnqueue = (q: Queryable): Queryable => ({
      query: async <T>(sql: string, params?: unknown[]) => {
        if (sql.includes('INSERT INTO proc_state')) throw new Error('connection reset');
        return q.query<T>(sql, params);
      },
    });
    const broken: Db = Object.assign(Object.create(null), {
      kind: pg.db.kind,
      query: failEnqueue(pg.db).query,
      tx: <T>(fn: (tx: Queryable) => Promise<T>) => pg.db.tx((tx) => fn(failEnqueue(tx))),
      listen: pg.db.listen.bind(pg.db),
      localWake: pg.db.localWake.bind(pg.db),
      session: pg.db.session.bind(pg.db),
      close: async () => {},
    });
    const brokenCtx = { ...ctx, db: broken };
    const res = await buildRouter().handle(
      {
        method: 'POST',
        path: '/cminmsgs/send',
        headers: { 'content-type': 'application/xml' },
        query: {},
        body: wire({ TYPE: 'LDM', SEQN: 'lost?' }),
        params: {},
        isAdmin: false,
      },
      brokenCtx,
    );
    expect(res.status).toBe(200);
    const id = Number(res.body);
    expect((await pg.db.query(`SELECT 1 FROM proc_state WHERE msg_id = $1`, [id])).rowCount).toBe(0);
    const pollCtx = makeContext({ db: pg.db, mailbox: my.mailbox });
    expect(await drainPoller(pollCtx)).toBeGreaterThanOrEqual(1);
    await drainPump(pollCtx);
    const row = await pg.db.query(`SELECT status, note FROM proc_state WHERE msg_id = $1`, [id]);
    expect(row.rows[0]).toEqual({ status: 'SKIPPED', note: 'ignored-type:LDM' });
  });

  it('admin routes answer 403 to a caller that is not an operator', async () => {
    const r = await buildRouter().handle(
      { method: 'GET', path: '/admin/stats', headers: {}, query: {}, body: '', params: {}, isAdmin: false },
      ctx,
    );
    expect(r.status).toBe(403);
  });
});
