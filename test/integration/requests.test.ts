import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Router } from '../../lib/http/router.ts';
import type { HttpRequest } from '../../lib/http/types.ts';
import { readFlight } from '../../lib/flights/store.ts';
import { reconcileRequests } from '../../lib/requests/reconcile.ts';
import { readRefSet } from '../../lib/requests/reference.ts';
import { requestRoutes } from '../../lib/requests/routes.ts';
import { expireRequests, requestDay, requestReference } from '../../lib/requests/send.ts';
import { canMove, REQ_TRANSITIONS, type ReqStatus } from '../../lib/requests/track.ts';
import { formatLocalTime } from '../../lib/shared/time.ts';
import { flight, refd, schd } from '../fixtures/messages/build.ts';
import { flightPipeline } from '../fixtures/messages/pump.ts';
import { freshMysql, freshPg, type TestPg } from '../helpers/services.ts';
import { mailboxWith } from '../helpers/pipeline.ts';
import { freePort } from '../helpers/freePort.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';

let pg: TestPg;
let p: Awaited<ReturnType<typeof flightPipeline>>;
let seq = 1;
beforeAll(async () => {
  pg = await freshPg();
  p = await flightPipeline(pg);
});
afterAll(async () => pg?.drop());
beforeEach(async () => {
  await pg.db.query(`TRUNCATE req_track, flight_schd, msg_event CASCADE`);
});

const reqRows = async () =>
  (
    await pg.db.query<{ id: number; status: ReqStatus; close_reason: string | null; scope: string }>(
      `SELECT id, status, close_reason, scope FROM req_track ORDER BY id`,
    )
  ).rows;
const outbound = async () =>
  (await pg.db.query<{ ID: number; MSG_TEXT: string }>(`SELECT "ID", "MSG_TEXT" FROM "COUTMSGS" ORDER BY "ID"`)).rows;
/** The COUTMSGS rows carrying request `id`'s own marker (its SEQN), read from the mailbox table. */
const rowsOf = async (id: number) =>
  (
    await pg.db.query<{ ID: number }>(
      `SELECT "ID" FROM "COUTMSGS" WHERE "MSG_TEXT" LIKE $1 AND "MSG_TEXT" LIKE '%<TYPE>RQFD</TYPE>%' ORDER BY "ID"`,
      [`%<SEQN>${id}</SEQN>%`],
    )
  ).rows;
const adminGet = (path: string): HttpRequest => ({ method: 'GET', path, headers: {}, query: {}, body: '', params: {}, isAdmin: true });
const view = async (id: number) =>
  (await new Router(requestRoutes).handle(adminGet(`/admin/requests/${id}`), p.ctx)).body as {
    status: string;
    audit: Record<string, unknown>[];
  };
/** A mailbox whose outbound write is lost on the way back: the row is written, the caller gets an error. */
const answerLost = () =>
  mailboxWith(p.mailbox, {
    insertOutbound: async (text) => {
      await p.mailbox.insertOutbound(text);
      throw new Error('connection reset after insert');
    },
    findOutbound: async () => {
      throw new Error('mailbox unreachable');
    },
  });
const tz = 'Asia/Shanghai';
const local = (at: Date) => formatLocalTime(at, tz);
const resp = (day: string, dttm: string) =>
  schd('RESP', { seqn: seq++, dttm, opdy: day, flights: [flight({ FLID: `R${seq}`, OPDY: day, FLNO: '0001' })] });
/** The flight the last `resp('20261130', …)` carried, at version 1, made by message `msgId`. */
const answered = (msgId: number) => ({
  flid: `R${seq}`,
  operationDay: '20261130',
  scalars: { FLNO: '0001' },
  status: 'ACTIVE',
  stateVersion: 1,
  lastMsgId: msgId,
});

describe('RQFD request lifecycle', () => {
  it('the transition table allows REGISTERED → SENT → DONE | EXPIRED only', () => {
    const all: ReqStatus[] = ['REGISTERED', 'SENT', 'DONE', 'EXPIRED'];
    const allowed = all.flatMap((a) => all.filter((b) => canMove(a, b)).map((b) => `${a}>${b}`));
    expect(allowed).toEqual(['REGISTERED>SENT', 'REGISTERED>EXPIRED', 'SENT>DONE', 'SENT>EXPIRED']);
    expect(REQ_TRANSITIONS.DONE).toEqual([]);
  });

  it('writes the RQFD to COUTMSGS and is SENT only once the row is confirmed', async () => {
    const r = await requestDay(p.ctx, '20261130');
    expect(r).toMatchObject({ status: 'SENT', scope: '20261130', shadow: false });
    const out = await outbound();
    expect(out.at(-1)!.ID).toBe(r.outboundId);
    expect(out.at(-1)!.MSG_TEXT).toContain('<TYPE>RQFD</TYPE>');
    expect(out.at(-1)!.MSG_TEXT).toContain('<OPDY>20261130</OPDY>');
    expect(out.at(-1)!.MSG_TEXT).toContain(`<SEQN>${r.id}</SEQN>`);
  });

  // REQ_TRACK keeps its sender. Seen red: with wire.ts writing 'MSGX' whatever the
  // setting, the row said <SNDR>MSGX</SNDR> and the request named no sender.
  it('keeps the sender and receiver it was written as, and is reconciled under that sender after the setting changes', async () => {
    const aodb = { ...p.ctx, config: { ...p.ctx.config, requests: { sender: 'AODB-2', receiver: 'FIMS_T1' } } };
    const r = await requestDay(aodb, '20261130');
    expect(r).toMatchObject({ status: 'SENT', sender: 'AODB-2', receiver: 'FIMS_T1' });
    const text = (await outbound()).at(-1)!.MSG_TEXT;
    expect(text).toContain('<SNDR>AODB-2</SNDR><RCVR>FIMS_T1</RCVR>');
    expect(await view(r.id)).toMatchObject({ sender: 'AODB-2', receiver: 'FIMS_T1' });
    const kept = await pg.db.query(`SELECT sender, receiver FROM req_track WHERE id = $1`, [r.id]);
    expect(kept.rows).toEqual([{ sender: 'AODB-2', receiver: 'FIMS_T1' }]);

    // Written but unconfirmed as AODB-2; the setting is back to MSGX when the sweep looks for it.
    await expect(requestDay({ ...aodb, mailbox: answerLost() }, '20261201')).rejects.toThrow(/not confirmed/);
    expect(await reconcileRequests(p.ctx)).toEqual({ confirmed: 1, resent: 0 });
    const latest = (await reqRows()).at(-1)!;
    expect(latest).toMatchObject({ scope: '20261201', status: 'SENT' });
    expect((await outbound()).filter((o) => o.MSG_TEXT.includes('<OPDY>20261201</OPDY>'))).toHaveLength(1);
  });

  it('MSGX_REQUEST_SENDER and _RECEIVER default to MSGX and FIMS and refuse what is no party code', async () => {
    const { loadConfig } = await import('../../lib/config/config.ts');
    expect(loadConfig({}).requests).toEqual({ sender: 'MSGX', receiver: 'FIMS' });
    expect(() => loadConfig({ MSGX_REQUEST_SENDER: '<X>' })).toThrow(/MSGX_REQUEST_SENDER: must be a wire party code/);
    expect(() => loadConfig({ MSGX_REQUEST_RECEIVER: 'A B' })).toThrow(/MSGX_REQUEST_RECEIVER: must be a wire party code/);
  });

  it('a written row that cannot be confirmed by its ID is found by its marker: SENT, written once, audited', async () => {
    const ctx = { ...p.ctx, mailbox: mailboxWith(p.mailbox, { outboundExists: async () => false }) };
    const r = await requestDay(ctx, '20261130');
    expect(r).toMatchObject({ status: 'SENT' });
    expect(await rowsOf(r.id)).toHaveLength(1);
    expect(r.outboundId).toBe((await rowsOf(r.id))[0]!.ID);
    expect((await view(r.id)).audit).toEqual([expect.objectContaining({ what: 'reconciled', outboundId: r.outboundId, when: 'on send' })]);
  });

  it('a write whose outcome is unknown and cannot be checked leaves the request REGISTERED', async () => {
    const ctx = {
      ...p.ctx,
      mailbox: mailboxWith(p.mailbox, {
        outboundExists: async () => false,
        findOutbound: async () => {
          throw new Error('mailbox gone');
        },
      }),
    };
    await expect(requestDay(ctx, '20261130')).rejects.toThrow(/not confirmed; left REGISTERED/);
    expect((await reqRows()).map((r) => r.status)).toEqual(['REGISTERED']);
  });

  it('a new request expires the open one (one open request per kind)', async () => {
    await requestDay(p.ctx, '20261130');
    await requestDay(p.ctx, '20261201');
    expect((await reqRows()).map((r) => `${r.scope}:${r.status}:${r.close_reason ?? ''}`)).toEqual([
      '20261130:EXPIRED:superseded',
      '20261201:SENT:',
    ]);
  });

  it('shadow mode never writes the mailbox', async () => {
    const before = (await outbound()).length;
    const ctx = { ...p.ctx, config: { ...p.ctx.config, shadow: true } };
    const r = await requestDay(ctx, '20261130');
    expect(r).toMatchObject({ status: 'REGISTERED', shadow: true, outboundId: null });
    expect((await outbound()).length).toBe(before);
  });

  it('a timeout expires it, and a RESP after that is SKIPPED and applies nothing', async () => {
    await requestDay(p.ctx, '20261130');
    p.clock.advance(p.ctx.config.lifecycle.requestTimeoutMs + 1000);
    expect(await expireRequests(p.ctx)).toBe(1);
    expect((await reqRows())[0]).toMatchObject({ status: 'EXPIRED', close_reason: 'timeout' });
    const [id] = await p.post(resp('20261130', local(p.clock.now())));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SKIPPED', note: 'no-open-request' });
    expect((await pg.db.query(`SELECT count(*)::int AS n FROM flight_schd`)).rows[0]).toEqual({ n: 0 });
  });

  it('a RESP arriving after the timeout but before the sweep is SKIPPED and expires the request', async () => {
    await requestDay(p.ctx, '20261130');
    p.clock.advance(p.ctx.config.lifecycle.requestTimeoutMs + 1000);
    const [id] = await p.post(resp('20261130', local(p.clock.now())));
    await p.drain();
    expect((await p.status(id!))?.note).toMatch(/^request-expired:/);
    expect((await reqRows())[0]).toMatchObject({ status: 'EXPIRED', close_reason: 'timeout' });
  });
});

describe('RESP matching', () => {
  it('without an open request: SKIPPED no-open-request, nothing applied', async () => {
    const [id] = await p.post(resp('20261130', local(p.clock.now())));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SKIPPED', note: 'no-open-request' });
    expect((await pg.db.query(`SELECT count(*)::int AS n FROM flight_schd`)).rows[0]).toEqual({ n: 0 });
  });

  it('for another day, or older than the request: SKIPPED with the reason; the request stays open', async () => {
    const sentAt = p.clock.now();
    const r = await requestDay(p.ctx, '20261130');
    const [a, b] = await p.post(resp('20261201', local(sentAt)), resp('20261130', local(new Date(sentAt.getTime() - 1000))));
    await p.drain();
    // The note names the open request it was compared with, and the scope that request is for.
    expect(await p.status(a!)).toMatchObject({ status: 'SKIPPED', note: `request-scope-mismatch:${r.id}:20261130` });
    expect(await p.status(b!)).toMatchObject({ status: 'SKIPPED', note: `answer-older-than-request:${r.id}` });
    expect((await reqRows())[0]!.status).toBe('SENT');
  });

  it('time-unit mismatch: a DTTM in the same second as a sub-second send time matches', async () => {
    p.clock.set('2026-11-29T02:00:00.750Z'); // sent at .750 ms; DTTM has whole seconds only
    const r = await requestDay(p.ctx, '20261130');
    const [id] = await p.post(resp('20261130', local(p.clock.now())));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SUCCEEDED' });
    expect((await reqRows()).find((x) => x.id === r.id)).toMatchObject({ status: 'DONE', close_reason: 'answered' });
    const log = await pg.db.query(`SELECT styp, request_id FROM schd_snap_log WHERE request_id = $1`, [r.id]);
    expect(log.rows).toEqual([{ styp: 'RESP', request_id: r.id }]);
  });

  it('compares in one zone: the same instant written in another airport zone still matches', async () => {
    const berlin = await flightPipeline(pg, { MSGX_TIMEZONE: 'Europe/Berlin' });
    berlin.clock.set('2026-11-29T03:00:00Z');
    await requestDay(berlin.ctx, '20261130');
    const dttm = formatLocalTime(berlin.clock.now(), 'Europe/Berlin'); // 04:00 local in Berlin, 11:00 in Shanghai
    const [id] = await berlin.post(resp('20261130', dttm));
    await berlin.drain();
    expect(await berlin.status(id!)).toMatchObject({ status: 'SUCCEEDED' });
    // The answer's flight, as it carried it, made by that answer.
    expect(await readFlight(pg.db, `R${seq}`)).toMatchObject(answered(id!));
  });
});

describe('compensation (docs/flights.md "Requests"): reconcile against COUTMSGS before anything is resent', () => {
  it('written but unconfirmed: the answer waits (not skipped), the sweep finds the row, no resend, the answer then matches', async () => {
    const sentAt = p.clock.now();
    await expect(requestDay({ ...p.ctx, mailbox: answerLost() }, '20261130')).rejects.toThrow(/not confirmed/);
    const [req] = await reqRows();
    expect(req).toMatchObject({ status: 'REGISTERED' });

    // The real answer arrives before the sweep ran: it waits as FAILED(INFRA), it is not skipped.
    const [id] = await p.post(resp('20261130', local(sentAt)));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'FAILED', error_class: 'INFRA' });
    expect((await p.status(id!))!.error_detail).toMatch(/not confirmed yet/);

    expect(await reconcileRequests(p.ctx)).toEqual({ confirmed: 1, resent: 0 });
    expect(await rowsOf(req!.id)).toHaveLength(1); // never written twice
    expect(await view(req!.id)).toMatchObject({
      status: 'SENT',
      audit: [expect.objectContaining({ what: 'reconciled', outboundId: (await rowsOf(req!.id))[0]!.ID })],
    });

    p.clock.advance(p.ctx.config.pipeline.backoffMaxMs);
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SUCCEEDED' });
    const v = await view(req!.id);
    expect(v.status).toBe('DONE');
    // Matched without an echo: the fallback, recorded as such.
    expect(v.audit.at(-1)).toMatchObject({
      what: 'answer-matched',
      method: 'fallback',
      rule: 'same kind, open, DTTM >= sentAt',
      msgId: id,
    });
  });

  // An outage is not a failure: with COUTMSGS unreachable the reconciliation cannot run, and the
  // answer must outlast MSGX_MAX_ATTEMPTS waits without spending one (it used to be
  // DEAD(EXHAUSTED) after ~15 s: seen red with match.ts throwing a plain InfraError again).
  it('an answer waiting on a reconciliation that cannot run spends no attempt, and matches once COUTMSGS is back', async () => {
    const sentAt = p.clock.now();
    await expect(requestDay({ ...p.ctx, mailbox: answerLost() }, '20261130')).rejects.toThrow(/not confirmed/);
    const [req] = await reqRows();
    const [id] = await p.post(resp('20261130', local(sentAt)));
    const unreachable = { ...p.ctx, mailbox: answerLost() };
    for (let i = 0; i < p.ctx.config.pipeline.maxAttempts * 2; i++) {
      await p.drain();
      await expect(reconcileRequests(unreachable)).rejects.toThrow(/mailbox unreachable/);
      p.clock.advance(30_000); // ten of these stay inside the request's 10-minute timeout
    }
    const spent = await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM proc_attempt WHERE msg_id = $1`, [id]);
    expect(spent.rows[0]!.n).toBeGreaterThan(p.ctx.config.pipeline.maxAttempts); // it was tried, more often than the limit
    await p.drain();
    const waiting = await pg.db.query<{ status: string; attempts: number; error_class: string; error_detail: string }>(
      `SELECT status, attempts, error_class, error_detail FROM proc_state WHERE msg_id = $1`,
      [id],
    );
    expect(waiting.rows[0]).toMatchObject({ status: 'FAILED', attempts: 0, error_class: 'INFRA' });
    expect(waiting.rows[0]!.error_detail).toMatch(/not confirmed yet.*\(no attempt counted\)$/);

    expect(await reconcileRequests(p.ctx)).toEqual({ confirmed: 1, resent: 0 });
    p.clock.advance(p.ctx.config.pipeline.backoffMaxMs);
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SUCCEEDED' });
    expect((await view(req!.id)).status).toBe('DONE');
    expect(await readFlight(pg.db, `R${seq}`)).toMatchObject(answered(id!));
  });

  it('the wait is bounded by the request timeout: then SKIPPED request-expired, not EXHAUSTED', async () => {
    const sentAt = p.clock.now();
    await expect(requestDay({ ...p.ctx, mailbox: answerLost() }, '20261130')).rejects.toThrow(/not confirmed/);
    const [req] = await reqRows();
    const [id] = await p.post(resp('20261130', local(sentAt)));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'FAILED', error_class: 'INFRA' });
    p.clock.advance(p.ctx.config.lifecycle.requestTimeoutMs);
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SKIPPED', note: `request-expired:${req!.id}` });
    expect(await reqRows()).toEqual([expect.objectContaining({ id: req!.id, status: 'EXPIRED', close_reason: 'timeout' })]);
  });

  it('never written: the sweep finds no row, and only then writes it again, once, with the same SEQN', async () => {
    const failing = mailboxWith(p.mailbox, {
      insertOutbound: async () => {
        throw new Error('mailbox refused the insert');
      },
    });
    await expect(requestDay({ ...p.ctx, mailbox: failing }, '20261130')).rejects.toThrow(/not confirmed/);
    const [req] = await reqRows();
    expect(await rowsOf(req!.id)).toHaveLength(0);
    expect(await reconcileRequests(p.ctx)).toEqual({ confirmed: 0, resent: 1 });
    expect(await reconcileRequests(p.ctx)).toEqual({ confirmed: 0, resent: 0 });
    expect(await rowsOf(req!.id)).toHaveLength(1);
    const v = await view(req!.id);
    expect(v.status).toBe('SENT');
    expect(v.audit.map((a) => a.what)).toEqual(['reconcile-absent', 'resent']);
  });

  it('asked again while the last request may have been written: the row is looked for first, not written twice', async () => {
    await expect(requestDay({ ...p.ctx, mailbox: answerLost() }, '20261130')).rejects.toThrow(/not confirmed/);
    const again = await requestDay(p.ctx, '20261130');
    const [req] = await reqRows();
    expect(again).toMatchObject({ id: req!.id, status: 'SENT', reconciled: true });
    expect(await reqRows()).toHaveLength(1);
    expect(await rowsOf(req!.id)).toHaveLength(1);
  });

  it('an answer echoing our SEQN (SCHD/RQSN) matches exactly, and confirms an unconfirmed write', async () => {
    const sentAt = p.clock.now();
    await expect(requestDay({ ...p.ctx, mailbox: answerLost() }, '20261130')).rejects.toThrow(/not confirmed/);
    const [req] = await reqRows();
    const echoed = (id: number, dttm: string) => resp('20261130', dttm).replace('<SCHD>', `<SCHD><RQSN>${id}</RQSN>`);
    const [a] = await p.post(echoed(req!.id, local(sentAt)));
    await p.drain();
    expect(await p.status(a!)).toMatchObject({ status: 'SUCCEEDED' });
    const v = await view(req!.id);
    expect(v.status).toBe('DONE');
    expect(v.audit.map((x) => [x.what, x.method ?? null])).toEqual([
      ['confirmed-by-answer', null],
      ['answer-matched', 'echo'],
    ]);
    expect(await rowsOf(req!.id)).toHaveLength(1);

    // An echo of a closed (or unknown) request is never applied to the open one.
    const next = await requestDay(p.ctx, '20261130');
    const [b, c] = await p.post(echoed(req!.id, local(p.clock.now())), echoed(999999, local(p.clock.now())));
    await p.drain();
    expect(await p.status(b!)).toMatchObject({ status: 'SKIPPED', note: `request-closed:${req!.id}:DONE` });
    expect(await p.status(c!)).toMatchObject({ status: 'SKIPPED', note: 'unknown-request:999999' });
    expect((await view(next.id)).status).toBe('SENT');
  });
});

describe('finding a request row by its marker, on both mailboxes', () => {
  it.each(['pg', 'mysql'] as const)(
    '%s: the earliest row with every fragment, among the newest rows; wildcards are literal',
    async (kind) => {
      const my = kind === 'mysql' ? await freshMysql() : undefined;
      const box = my?.mailbox ?? p.mailbox;
      try {
        const enc = (id: number, type: string) =>
          `<MSG><META><SNDR>MSGX</SNDR><RCVR>FIMS</RCVR><SEQN>${id}</SEQN><TYPE>${type}</TYPE></META></MSG>`;
        await box.insertOutbound(enc(900042, 'RQRF'));
        await box.insertOutbound(enc(9000421, 'RQFD'));
        const ours = await box.insertOutbound(enc(900042, 'RQFD'));
        await box.insertOutbound(enc(900042, 'RQFD')); // a duplicate: the first one is the answer
        await box.insertOutbound('text with aXbYc');
        expect(await box.findOutbound(['<SNDR>MSGX</SNDR>', '<SEQN>900042</SEQN>', '<TYPE>RQFD</TYPE>'], 100)).toBe(ours);
        expect(await box.findOutbound(['<SEQN>900043</SEQN>'], 100)).toBeUndefined();
        expect(await box.findOutbound(['a_b%c'], 100)).toBeUndefined();
        expect(await box.findOutbound(['<SEQN>900042</SEQN>', '<TYPE>RQFD</TYPE>'], 2)).toBe(ours + 1); // only the newest 2 rows are looked at
      } finally {
        await my?.drop();
      }
    },
  );
});

describe('admin route and reference data', () => {
  const req = (body: unknown, isAdmin = true): HttpRequest => ({
    method: 'POST',
    path: '/admin/requests',
    headers: { 'content-type': 'application/json' },
    query: {},
    body: JSON.stringify(body),
    params: {},
    isAdmin,
  });

  it('POST /admin/requests {day} sends an RQFD; non-operators get 403, a bad day 400', async () => {
    const router = new Router(requestRoutes);
    const ok = await router.handle(req({ day: '20261130' }), p.ctx);
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ status: 'SENT', scope: '20261130' });
    expect((await router.handle(req({ day: '20261130' }, false), p.ctx)).status).toBe(403);
    expect((await router.handle(req({ day: 'tomorrow' }), p.ctx)).status).toBe(400);
  });

  it('POST /admin/requests answers 503 naming the reason while the mailbox is unreachable, never 500', async () => {
    const router = new Router(requestRoutes);
    // A real refused connection, not a thrown stand-in: a MariaDB URL on a port nothing listens on.
    const dead = new MysqlMailbox(`mysql://root@127.0.0.1:${await freePort()}/test`);
    try {
      const first = await router.handle(req({ day: '20261130' }), { ...p.ctx, mailbox: dead });
      expect(first.status).toBe(503);
      expect(first.body).toMatchObject({ error: 'unavailable', detail: expect.stringMatching(/not confirmed.*try again later/) });
      // The request left unconfirmed is reconciled first on the next ask: that read fails too.
      const again = await router.handle(req({ day: '20261130' }), { ...p.ctx, mailbox: dead });
      expect(again.status).toBe(503);
      expect(again.body).toMatchObject({
        error: 'unavailable',
        detail: expect.stringMatching(/unreachable \(ECONNREFUSED\); try again later/),
      });
    } finally {
      await dead.close();
    }
  });

  it('a REFD answers the open RQRF of its rtype, confirming one whose write was unconfirmed; the fallback is audited', async () => {
    await expect(requestReference({ ...p.ctx, mailbox: answerLost() }, 'AIRPORT')).rejects.toThrow(/not confirmed/);
    const [req] = await reqRows();
    const [id] = await p.post(refd({ seqn: seq++, dttm: local(p.clock.now()) }, 'AIRPORT', [{ RKEY: 'CAN', NAME: 'Baiyun' }]));
    await p.drain();
    expect(await p.status(id!)).toMatchObject({ status: 'SUCCEEDED' });
    const v = await view(req!.id);
    expect(v.status).toBe('DONE');
    expect(v.audit.map((a) => [a.what, a.method ?? null])).toEqual([
      ['confirmed-by-answer', null],
      ['answer-matched', 'fallback'],
    ]);
    expect(await reconcileRequests(p.ctx)).toEqual({ confirmed: 0, resent: 0 }); // nothing left to reconcile, nothing resent
  });

  it('a REFD dated before the RQRF, or undated, is applied but answers no request (the fallback needs DTTM >= sentAt)', async () => {
    const before = local(p.clock.now());
    p.clock.advance(5000);
    await requestReference(p.ctx, 'AIRPORT');
    const [req] = await reqRows();
    const [older, undated] = await p.post(
      refd({ seqn: seq++, dttm: before }, 'AIRPORT', [{ RKEY: 'PEK', NAME: 'Capital' }]),
      refd({ seqn: seq++ }, 'AIRPORT', [{ RKEY: 'PEK', NAME: 'Capital' }]),
    );
    await p.drain();
    expect(await p.status(older!)).toMatchObject({ status: 'SUCCEEDED' });
    expect(await p.status(undated!)).toMatchObject({ status: 'SUCCEEDED' });
    const v = await view(req!.id);
    expect(v.status).toBe('SENT');
    expect(v.audit.filter((a) => a.what === 'answer-not-matched').map((a) => a.reason)).toEqual([
      'answer-older-than-request',
      'answer-without-dttm',
    ]);
    // An answer dated in the send's own second matches.
    const [fresh] = await p.post(refd({ seqn: seq++, dttm: local(p.clock.now()) }, 'AIRPORT', [{ RKEY: 'PEK', NAME: 'Capital' }]));
    await p.drain();
    expect(await p.status(fresh!)).toMatchObject({ status: 'SUCCEEDED' });
    expect((await view(req!.id)).status).toBe('DONE');
  });

  it('a REFD answer replaces the whole set of its rtype', async () => {
    const [a, b] = await p.post(
      refd({ seqn: seq++ }, 'AIRLINE', [
        { RKEY: 'CZ', NAME: 'China Southern' },
        { RKEY: 'MU', NAME: 'China Eastern' },
      ]),
      refd({ seqn: seq++ }, 'AIRLINE', [
        { RKEY: 'CZ', NAME: 'China Southern Airlines' },
        { RKEY: 'HU', NAME: 'Hainan' },
      ]),
    );
    await p.drain();
    expect((await p.status(a!))?.status).toBe('SUCCEEDED');
    expect((await p.status(b!))?.status).toBe('SUCCEEDED');
    const set = await readRefSet(pg.db, 'AIRLINE');
    expect(set.map((r) => `${r.rkey}:v${r.version}`)).toEqual(['CZ:v2', 'HU:v1']);
    expect(set[0]!.payload).toEqual([
      ['RKEY', 'CZ'],
      ['NAME', 'China Southern Airlines'],
    ]);
  });
});
