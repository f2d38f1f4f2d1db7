import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Router } from '../../lib/http/router.ts';
import type { HttpRequest } from '../../lib/http/types.ts';
import { readFlight } from '../../lib/flights/store.ts';
import { expireRequests, readRefSet, requestDay, requestRoutes } from '../../lib/requests/index.ts';
import { canMove, REQ_TRANSITIONS, type ReqStatus } from '../../lib/requests/track.ts';
import { formatLocalTime } from '../../lib/shared/time.ts';
import { flight, refd, schd } from '../fixtures/messages/build.ts';
import { flightPipeline } from '../fixtures/messages/pump.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';
import { mailboxWith } from '../helpers/pipeline.ts';

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
  (await pg.db.query<{ id: number; status: ReqStatus; close_reason: string | null; scope: string }>(`SELECT id, status, close_reason, scope FROM req_track ORDER BY id`)).rows;
const outbound = async () => (await pg.db.query<{ ID: number; MSG_TEXT: string }>(`SELECT "ID", "MSG_TEXT" FROM "COUTMSGS" ORDER BY "ID"`)).rows;
const tz = 'Asia/Shanghai';
const local = (at: Date) => formatLocalTime(at, tz);
const resp = (day: string, dttm: string) =>
  schd('RESP', { seqn: seq++, dttm, opdy: day, flights: [flight({ FLID: `R${seq}`, OPDY: day, FLNO: '0001' })] });

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

  it('an unconfirmed outbound row leaves the request REGISTERED', async () => {
    const ctx = { ...p.ctx, mailbox: mailboxWith(p.mailbox, { outboundExists: async () => false }) };
    await expect(requestDay(ctx, '20261130')).rejects.toThrow(/not confirmed/);
    expect((await reqRows()).map((r) => r.status)).toEqual(['REGISTERED']);
  });

  it('a new request expires the open one (one open request per kind)', async () => {
    await requestDay(p.ctx, '20261130');
    await requestDay(p.ctx, '20261201');
    expect((await reqRows()).map((r) => `${r.scope}:${r.status}:${r.close_reason ?? ''}`)).toEqual(['20261130:EXPIRED:superseded', '20261201:SENT:']);
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
    await requestDay(p.ctx, '20261130');
    const [a, b] = await p.post(resp('20261201', local(sentAt)), resp('20261130', local(new Date(sentAt.getTime() - 1000))));
    await p.drain();
    expect((await p.status(a!))?.note).toMatch(/^request-scope-mismatch:/);
    expect((await p.status(b!))?.note).toMatch(/^answer-older-than-request:/);
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
    expect(await readFlight(pg.db, `R${seq}`)).toBeDefined();
  });
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

  it('a REFD answer replaces the whole set of its rtype', async () => {
    const [a, b] = await p.post(
      refd({ seqn: seq++ }, 'AIRLINE', [{ RKEY: 'CZ', NAME: 'China Southern' }, { RKEY: 'MU', NAME: 'China Eastern' }]),
      refd({ seqn: seq++ }, 'AIRLINE', [{ RKEY: 'CZ', NAME: 'China Southern Airlines' }, { RKEY: 'HU', NAME: 'Hainan' }]),
    );
    await p.drain();
    expect((await p.status(a!))?.status).toBe('SUCCEEDED');
    expect((await p.status(b!))?.status).toBe('SUCCEEDED');
    const set = await readRefSet(pg.db, 'AIRLINE');
    expect(set.map((r) => `${r.rkey}:v${r.version}`)).toEqual(['CZ:v2', 'HU:v1']);
    expect(set[0]!.payload).toEqual([['RKEY', 'CZ'], ['NAME', 'China Southern Airlines']]);
  });
});
