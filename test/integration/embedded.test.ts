import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { acceptInbound } from '../../lib/pipeline/ingress.ts';
import { buildContext, closeContext } from '../../lib/app/buildContext.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { startRoles } from '../../lib/twin/startRoles.ts';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { fileSink } from '../helpers/fileSink.ts';
import { mailboxWith } from '../helpers/pipeline.ts';
import { seedPgliteDataDir, waitFor } from '../helpers/services.ts';

/**
 * The twin's embedded default end to end, in this process so a mailbox fault can be injected:
 * PGlite, the mailbox as tables in it, the file sink, every role running on the real clock, the
 * HTTP API. The lifecycles the PostgreSQL suites cover, driven through the same public paths:
 * the pipeline with its back-fill (and the back-fill sweep's retry), POST /admin/requests, the
 * outbox to the file sink, and transactional messages (commit, rollback, check-back, ack).
 * Judged from outside: HTTP answers, the file sink, the mailbox tables other systems read.
 */
const DAY = '20261129';
let dir: string;
let ctx: AppContext;
let base: string;
let stop: AbortController;
let roles: Awaited<ReturnType<typeof startRoles>>;
let server: Awaited<ReturnType<typeof startHttpServer>>;
let checkServer: Server;
let checkAnswer = 'COMMIT';
let failBackfills = 0;

beforeAll(async () => {
  checkServer = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: checkAnswer })),
  );
  await new Promise<void>((r) => checkServer.listen(0, '127.0.0.1', r));
  const checkOrigin = `http://127.0.0.1:${(checkServer.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'msgx-embedded-'));
  await seedPgliteDataDir(dir);
  const config = loadConfig({
    MSGX_RUNTIME: 'twin',
    MSGX_DATA_DIR: dir,
    MSGX_HTTP_PORT: '0',
    MSGX_POLL_INTERVAL_MS: '100',
    MSGX_DELIVERY_POLL_INTERVAL: '100ms',
    MSGX_SCHD_FLUSH_PERIOD: '200ms',
    MSGX_BACKFILL_INITIAL: '1s',
    MSGX_TX_CHECK_ALLOWED_ORIGINS: checkOrigin,
    MSGX_LOG_LEVEL: 'SILENT',
  });
  expect(config.pgUrl).toBeFalsy();
  const built = await buildContext(config, { migrate: true, log: silentLog });
  expect(built.db.kind).toBe('pglite');
  // The mailbox as the twin builds it, with a switch that makes its back-fill writes fail.
  ctx = {
    ...built,
    mailbox: mailboxWith(built.mailbox, {
      markProcessed: async (marks) => {
        if (failBackfills > 0) {
          failBackfills--;
          throw new Error('mailbox unavailable (injected)');
        }
        return built.mailbox.markProcessed(marks);
      },
    }),
  };
  stop = new AbortController();
  roles = await startRoles(ctx, stop.signal);
  server = await startHttpServer(ctx, buildRouter(roles.healthChecks), { port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  (globalThis as { checkOrigin?: string }).checkOrigin = checkOrigin;
});

afterAll(async () => {
  stop?.abort();
  server?.close();
  await roles?.done;
  await roles?.close();
  if (ctx) await closeContext(ctx);
  checkServer?.close();
  rmSync(dir, { recursive: true, force: true });
});

let seqn = 1;
const checkUrl = () => `${(globalThis as { checkOrigin?: string }).checkOrigin}/check`;
const gate = (code: string) => [{ CODE: code, BEG: `${DAY}093000`, END: `${DAY}101500` }];

async function send(xml: string): Promise<number> {
  const r = await fetch(`${base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: xml });
  expect(r.status).toBe(200);
  return Number(await r.text());
}

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const sink = (topic: string) => fileSink(dir, topic);

/** The mailbox row as the system that owns CMINMSGS sees it. */
async function mailboxRow(id: number) {
  const r = await ctx.db.query<{ PROC_STATUS: string | null; DATE_PROCESSED: Date | null }>(
    `SELECT "PROC_STATUS", "DATE_PROCESSED" FROM "CMINMSGS" WHERE "ID" = $1`,
    [id],
  );
  return r.rows[0];
}

describe('the twin on its embedded engine (PGlite)', () => {
  it('pipeline: a day plan and a gate change become flight state, msgx.msg events in the file sink and back-filled mailbox rows', async () => {
    const plan = await send(
      schd('DNLD', {
        seqn: seqn++,
        dttm: `${DAY}080000`,
        opdy: DAY,
        flights: [flight({ FLID: '5001', OPDY: DAY, AWCD: 'CZ', FLNO: '5001', GATE: gate('A1') })],
      }),
    );
    const change = await send(flop('GATE', { seqn: seqn++, dttm: `${DAY}090000` }, flight({ FLID: '5001', GATE: gate('A2') })));
    const f = await waitFor(
      async () => {
        const r = await api('GET', '/v1/flights/5001');
        return r.status === 200 && r.body.stateVersion === 2 ? r.body : null;
      },
      { timeoutMs: 30_000, what: 'flight 5001 at version 2' },
    );
    expect(f.GATE[0].CODE).toBe('A2');
    const events = await waitFor(
      () => {
        const e = sink('msgx.msg').filter((l) => l.key === '5001');
        return e.length >= 2 ? e : null;
      },
      { timeoutMs: 30_000, what: 'two msgx.msg events' },
    );
    // The sink is at-least-once (a send retried after a timeout appears twice): one per event id.
    const versions = new Map(events.map((e) => [e.headers['msgx-event-id'], JSON.parse(e.value).stateVersion as number]));
    expect([...versions.values()]).toEqual([1, 2]);
    for (const id of [plan, change])
      expect(
        await waitFor(async () => ((await mailboxRow(id))?.DATE_PROCESSED ? mailboxRow(id) : null), {
          timeoutMs: 30_000,
          what: `mailbox row ${id} back-filled`,
        }),
      ).toMatchObject({ PROC_STATUS: 'SUCCEEDED' });
  });

  it('concurrent requests share commits (group commit), yet each answer names its own stored row', async () => {
    const texts = Array.from({ length: 60 }, (_, i) =>
      flop(
        'ETOT',
        { seqn: 9000 + i, dttm: `${DAY}092000` },
        flight({ FLID: `6${String(i).padStart(3, '0')}`, ETOT: `${DAY}1015${String(i % 60).padStart(2, '0')}` }),
      ),
    );
    // Straight into the ingress in one tick (over HTTP the client paces them): one shared commit.
    const ids = (await Promise.all(texts.map((t) => acceptInbound(ctx, t, 'application/xml')))).map((r) => r.msgId);
    // One more over HTTP while the pipeline works through them.
    texts.push(flop('ETOT', { seqn: 9100, dttm: `${DAY}092000` }, flight({ FLID: '6100', ETOT: `${DAY}101500` })));
    ids.push(await send(texts.at(-1)!));
    expect(new Set(ids).size).toBe(texts.length);
    const stored = await ctx.db.query<{ ID: number; MSG_TEXT: string }>(
      `SELECT "ID", "MSG_TEXT" FROM "CMINMSGS" WHERE "ID" = ANY($1::bigint[])`,
      [ids],
    );
    const byId = new Map(stored.rows.map((r) => [r.ID, r.MSG_TEXT]));
    ids.forEach((id, i) => expect(byId.get(id), `row ${id}`).toBe(texts[i]));
    // The poller was woken for the batch: the pipeline settles every one.
    for (const id of ids)
      expect(
        await waitFor(async () => ((await mailboxRow(id))?.DATE_PROCESSED ? mailboxRow(id) : null), {
          timeoutMs: 60_000,
          what: `row ${id} processed`,
        }),
      ).toHaveProperty('PROC_STATUS');
  });

  it('back-fill sweep: a mailbox write that failed is retried until the row is back-filled', async () => {
    failBackfills = 1;
    const id = await send(flop('GATE', { seqn: seqn++, dttm: `${DAY}091000` }, flight({ FLID: '5001', GATE: gate('A3') })));
    await waitFor(async () => (await api('GET', '/v1/flights/5001')).body.GATE?.[0]?.CODE === 'A3', {
      timeoutMs: 30_000,
      what: 'the change applied',
    });
    expect(failBackfills, 'the injected failure was hit').toBe(0);
    const row = await waitFor(async () => ((await mailboxRow(id))?.DATE_PROCESSED ? mailboxRow(id) : null), {
      timeoutMs: 30_000,
      what: 'the sweep back-filling the row',
    });
    expect(row).toMatchObject({ PROC_STATUS: 'SUCCEEDED' });
  });

  it('POST /admin/requests: the RQFD is written to COUTMSGS, confirmed, and the request is SENT', async () => {
    const r = await api('POST', '/admin/requests', { day: '20261130' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ status: 'SENT', scope: '20261130' });
    const out = await ctx.db.query<{ MSG_TEXT: string }>(`SELECT "MSG_TEXT" FROM "COUTMSGS" WHERE "ID" = $1`, [r.body.outboundId]);
    expect(out.rows[0]!.MSG_TEXT).toContain('<TYPE>RQFD</TYPE>');
    expect(out.rows[0]!.MSG_TEXT).toContain('<OPDY>20261130</OPDY>');
  });

  it('transactional messages: commit → delivered to the file sink → ack → CONSUMED; rollback never delivers; the check-back decides an undecided one', async () => {
    const prep = (n: number, extra: Record<string, unknown> = {}) =>
      api('POST', '/v1/tx-messages', { topic: 'embedded.tx', key: `k${n}`, payload: { n }, checkUrl: checkUrl(), ...extra });
    const a = await prep(1);
    expect(a.status).toBe(201);
    expect((await api('POST', `/v1/tx-messages/${a.body.id}/commit`)).status).toBe(200);
    const b = await prep(2);
    expect((await api('POST', `/v1/tx-messages/${b.body.id}/rollback`)).status).toBe(200);
    checkAnswer = 'COMMIT';
    const c = await prep(3, { checkAfterMs: 1 });

    const delivered = await waitFor(
      () => {
        const got = sink('embedded.tx').map((l) => JSON.parse(l.value).n as number);
        return got.includes(1) && got.includes(3) ? got : null;
      },
      { timeoutMs: 30_000, what: 'tx 1 and tx 3 in the file sink' },
    );
    expect(delivered).not.toContain(2);
    expect((await api('GET', `/v1/tx-messages/${a.body.id}`)).body.status).toBe('DELIVERED');
    expect((await api('GET', `/v1/tx-messages/${b.body.id}`)).body.status).toBe('ROLLED_BACK');
    expect(['DELIVERED', 'COMMITTED']).toContain((await api('GET', `/v1/tx-messages/${c.body.id}`)).body.status);
    expect((await api('POST', `/v1/tx-messages/${a.body.id}/ack`)).status).toBe(200);
    expect((await api('GET', `/v1/tx-messages/${a.body.id}`)).body.status).toBe('CONSUMED');
  });
});
