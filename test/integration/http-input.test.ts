import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { makeContext } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, type TestMysql, type TestPg } from '../helpers/services.ts';

/**
 * The gate every JSON request passes, over real HTTP against the twin's whole router on real
 * PostgreSQL and MariaDB: input msgx cannot keep exactly as sent is refused with a 4xx that names
 * the field and the reason, and nothing of it is stored — judged from outside (the read API, the
 * admin API, an Idempotency-Key that is still free, the mailbox tables).
 *
 * Bodies are raw JSON text: a lone surrogate or `1e999` cannot be written by JSON.stringify.
 */
describe('HTTP input: refused with the field named, nothing stored', () => {
  let pg: TestPg;
  let my: TestMysql;
  let ctx: AppContext;
  let server: Server;
  let base: string;

  beforeAll(async () => {
    pg = await freshPg();
    my = await freshMysql();
    ctx = makeContext({
      db: pg.db,
      mailbox: my.mailbox,
      clock: systemClock,
      env: { MSGX_TX_CHECK_ALLOWED_ORIGINS: 'http://127.0.0.1:9', MSGX_LOG_LEVEL: 'SILENT' },
    });
    server = await startHttpServer(ctx, buildRouter(), { port: 0 });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server?.close();
    await my?.drop();
    await pg?.drop();
  });

  interface Answer {
    status: number;
    headers: Headers;
    json: { error?: string; detail?: string; field?: string; [k: string]: unknown };
  }
  const call = async (method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Answer> => {
    const res = await fetch(base + path, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body,
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : {} };
  };
  /** A valid prepare body followed by `fields` (raw JSON members); a repeated member wins, as JSON.parse reads it. */
  const prepare = (fields: string) =>
    `{"topic":"orders","payload":{"n":1},"checkUrl":"http://127.0.0.1:9/check"${fields ? `,${fields}` : ''}}`;

  /** Everything outside shows: tx-messages per state, the mailbox's inbound and outbound rows, the pause flag. */
  const outside = async () => {
    const stats = await call('GET', '/admin/stats');
    expect(stats.status).toBe(200);
    const count = async (table: string) => (await my.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM ${table}`))[0]!.n;
    return { txmsg: stats.json.txmsg, paused: stats.json.paused, inbound: await count('CMINMSGS'), outbound: await count('COUTMSGS') };
  };

  const refusedPrepares: [what: string, fields: string, field: string, reason: RegExp][] = [
    ['a lone high surrogate in key', '"key":"\\ud800"', 'key', /lone UTF-16 surrogate/],
    ['a lone low surrogate in key', '"key":"a\\udfffb"', 'key', /lone UTF-16 surrogate/],
    ['a lone surrogate deep in payload', '"payload":{"a":["x","\\ud800"]}', 'payload.a[1]', /lone UTF-16 surrogate/],
    ['a lone surrogate in a payload key', '"payload":{"\\udc00":1}', 'payload["\\udc00"]', /name holds a lone UTF-16 surrogate/],
    ['a lone surrogate in a header value', '"headers":{"h":"\\udfff"}', 'headers.h', /lone UTF-16 surrogate/],
    ['a lone surrogate in a header name', '"headers":{"\\ud800":"x"}', 'headers["\\ud800"]', /lone UTF-16 surrogate/],
    ['a lone surrogate in bizName', '"bizName":"\\ud800"', 'bizName', /lone UTF-16 surrogate/],
    ['a lone surrogate in createdBy', '"createdBy":"ok\\udbff"', 'createdBy', /lone UTF-16 surrogate/],
    ['a reversed pair (low then high)', '"key":"\\ude00\\ud83d"', 'key', /lone UTF-16 surrogate/],
    ['payload 1e999 (would be delivered as null)', '"payload":1e999', 'payload', /out of range/],
    ['payload -1e999', '"payload":-1e999', 'payload', /out of range/],
    ['a number out of range inside payload', '"payload":{"n":[1,2e400]}', 'payload.n[1]', /out of range/],
    ['checkAfterMs 1e999', '"checkAfterMs":1e999', 'checkAfterMs', /out of range/],
    ['header __proto__ (was dropped)', '"headers":{"__proto__":"x"}', 'headers.__proto__', /reserved name/],
    ['header constructor', '"headers":{"constructor":"x"}', 'headers.constructor', /reserved name/],
    ['header Prototype', '"headers":{"Prototype":"x"}', 'headers.Prototype', /reserved name/],
    ['header msgx-event-id (msgx sets it)', '"headers":{"msgx-event-id":"1"}', 'headers.msgx-event-id', /msgx- are reserved/],
    ['header MSGX-Source', '"headers":{"MSGX-Source":"me"}', 'headers.MSGX-Source', /msgx- are reserved/],
    ['topic "."', '"topic":"."', 'topic', /not a legal Kafka topic name/],
    ['topic ".."', '"topic":".."', 'topic', /not a legal Kafka topic name/],
    ['a topic of 250 characters', `"topic":"${'t'.repeat(250)}"`, 'topic', /at most 249/],
    ['a topic with a slash', '"topic":"a/b"', 'topic', /letters, digits/],
    ['a topic with a space', '"topic":"a b"', 'topic', /letters, digits/],
    ['an empty topic', '"topic":""', 'topic', /must not be empty/],
    ['an unknown field', '"priority":1', 'priority', /unknown field/],
  ];

  it.each(refusedPrepares)(
    'prepare with %s: 400 naming the field; nothing stored, the Idempotency-Key still free',
    async (_what, fields, field, reason) => {
      const before = await outside();
      const key = `k-${field}-${Math.random()}`;
      const r = await call('POST', '/v1/tx-messages', prepare(fields), { 'idempotency-key': key });
      expect(r.status).toBe(400);
      expect(r.json.error).toBe('invalid_request');
      expect(r.json.field).toBe(field);
      expect(r.json.detail!.startsWith(`${field}: `)).toBe(true);
      expect(r.json.detail).toMatch(reason);
      expect(await outside()).toEqual(before);
      // Nothing half-stored: the same key with a valid body creates a new message (201, not 200 or 409).
      const ok = await call('POST', '/v1/tx-messages', prepare(''), { 'idempotency-key': key });
      expect(ok.status).toBe(201);
    },
  );

  it.each([
    [
      'a surrogate pair (an emoji) in key, payload, header and bizName',
      '"key":"\\ud83d\\ude00","payload":"\\ud83d\\ude00","headers":{"h\\ud83d\\ude00":"\\ud83d\\ude00"},"bizName":"\\ud83d\\ude00"',
    ],
    ['a topic of exactly 249 characters', `"topic":"${'t'.repeat(249)}"`],
    ['a topic "..." (only "." and ".." are illegal)', '"topic":"..."'],
    ['a large but finite number', '"payload":1.7976931348623157e308'],
  ])('accepts %s and keeps it exactly', async (_what, fields) => {
    const sent = JSON.parse(prepare(fields)) as Record<string, unknown>;
    const r = await call('POST', '/v1/tx-messages', prepare(fields));
    expect(r.status).toBe(201);
    const view = await call('GET', `/v1/tx-messages/${String(r.json.id)}`);
    expect(view.status).toBe(200);
    expect(view.json.topic).toBe(sent.topic);
    expect(view.json.payload).toBe(typeof sent.payload === 'string' ? sent.payload : JSON.stringify(sent.payload));
    expect(view.json.key).toBe(sent.key ?? null);
    expect(view.json.headers).toEqual(sent.headers ?? {});
    expect(view.json.bizName).toBe(sent.bizName ?? null);
  });

  const ids = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => i + 1));
  const refusedAdmin: [what: string, method: string, path: string, body: string | undefined, field: string, reason: RegExp][] = [
    ['proc replay: an unknown field', 'POST', '/admin/replay', '{"kind":"proc","ids":[1],"bogus":1}', 'bogus', /unknown field/],
    ['proc replay: dryrun misspelt', 'POST', '/admin/replay', '{"kind":"proc","ids":[1],"dryrun":true}', 'dryrun', /unknown field/],
    ['proc replay: an id as hex text', 'POST', '/admin/replay', '{"kind":"proc","ids":["0x10"]}', 'ids[0]', /number/],
    ['proc replay: 10,001 ids', 'POST', '/admin/replay', `{"kind":"proc","ids":${ids(10_001)}}`, 'ids', /at most 10000 ids/],
    ['event replay: 10,001 ids', 'POST', '/admin/replay', `{"kind":"event","ids":${ids(10_001)}}`, 'ids', /at most 10000 ids/],
    ['event replay: an unknown field', 'POST', '/admin/replay', '{"kind":"event","target":"msg","dryrun":true}', 'dryrun', /unknown field/],
    ['event replay: an empty id list (was a 500)', 'POST', '/admin/replay', '{"kind":"event","ids":[]}', 'ids', /at least one/],
    ['event replay: an id 1e999', 'POST', '/admin/replay', '{"kind":"event","ids":[1e999]}', 'ids[0]', /out of range/],
    ['replay: an unknown kind', 'POST', '/admin/replay', '{"kind":"flight","ids":[1]}', 'kind', /"proc" or "event"/],
    ['request: day 99999999', 'POST', '/admin/requests', '{"day":"99999999"}', 'day', /between 20000101 and 20991231/],
    ['request: day 20260231', 'POST', '/admin/requests', '{"day":"20260231"}', 'day', /not a calendar date/],
    ['request: day 20261300', 'POST', '/admin/requests', '{"day":"20261300"}', 'day', /not a calendar date/],
    ['request: day as a number 99999999', 'POST', '/admin/requests', '{"day":99999999}', 'day', /between/],
    ['request: an unknown field', 'POST', '/admin/requests', '{"day":"20261130","force":true}', 'force', /unknown field/],
    ['request: a lone surrogate in rtype', 'POST', '/admin/requests', '{"rtype":"\\ud800"}', 'rtype', /lone UTF-16 surrogate/],
    ['pause: an unknown field', 'POST', '/admin/pause', '{"until":"tomorrow"}', 'until', /unknown field/],
    ['message 0x10 (was read as 16)', 'GET', '/admin/messages/0x10', undefined, 'msgId', /decimal digits/],
    ['message 1e3', 'GET', '/admin/messages/1e3', undefined, 'msgId', /decimal digits/],
    ['message -1', 'GET', '/admin/messages/-1', undefined, 'msgId', /decimal digits/],
    ['message 0', 'GET', '/admin/messages/0', undefined, 'msgId', /positive/],
    ['message 2^53', 'GET', '/admin/messages/9007199254740993', undefined, 'msgId', /positive ID/],
    ['trace 0x10', 'GET', '/admin/trace/0x10', undefined, 'msgId', /decimal digits/],
    ['request 0x10', 'GET', '/admin/requests/0x10', undefined, 'id', /decimal digits/],
  ];

  it.each(refusedAdmin)('%s: 400 naming the field, nothing changed', async (_what, method, path, body, field, reason) => {
    const before = await outside();
    const r = await call(method, path, body);
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('invalid_request');
    expect(r.json.field).toBe(field);
    expect(r.json.detail!.startsWith(`${field}: `)).toBe(true);
    expect(r.json.detail).toMatch(reason);
    expect(await outside()).toEqual(before);
    // No request was registered either (a registered one would be request 1).
    expect((await call('GET', '/admin/requests/1')).status).toBe(404);
  });

  it('the same routes still take what is right: decimal IDs, a real day, an empty action body', async () => {
    expect((await call('GET', '/admin/messages/16')).status).toBe(404); // no such message, but a valid ID
    expect((await call('GET', '/admin/trace/16')).status).toBe(404);
    const replay = await call('POST', '/admin/replay', `{"kind":"event","ids":${ids(10_000)},"dryRun":true}`);
    expect(replay.status).toBe(200);
    expect(replay.json.refused).toHaveLength(10_000); // no such events, each named
    expect((await call('POST', '/admin/pause', '{}')).status).toBe(200);
    expect((await call('POST', '/admin/resume')).status).toBe(200);
    expect((await outside()).paused).toBe(false);
    const day = await call('POST', '/admin/requests', '{"day":"20240229"}'); // a leap day
    expect(day.status).toBe(200);
    expect((await outside()).outbound).toBe(1);
  });

  it('every response says nosniff: JSON answers, refusals, text and the console', async () => {
    const answers = [
      await call('GET', '/admin/stats'),
      await call('GET', '/admin/messages/0x10'),
      await call('POST', '/v1/tx-messages', prepare('"key":"\\ud800"')),
      await call('GET', '/nowhere'),
    ];
    const text = await fetch(`${base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: '' });
    await text.text();
    for (const r of [...answers.map((a) => a.headers), text.headers]) expect(r.get('x-content-type-options')).toBe('nosniff');
    expect(answers[0]!.headers.get('content-type')).toBe('application/json');
  });
});

describe('console sign-in: a server-set HttpOnly cookie, never the token in script', () => {
  const TOKEN = 'console-test-token-0123456789';
  let pg: TestPg;
  let my: TestMysql;
  let server: Server;
  let base: string;

  beforeAll(async () => {
    pg = await freshPg();
    my = await freshMysql();
    const ctx = makeContext({
      db: pg.db,
      mailbox: my.mailbox,
      clock: systemClock,
      env: { MSGX_ADMIN_TOKEN: TOKEN, MSGX_LOG_LEVEL: 'SILENT' },
    });
    server = await startHttpServer(ctx, buildRouter(), { port: 0 });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server?.close();
    await my?.drop();
    await pg?.drop();
  });

  const login = (token: string, headers: Record<string, string> = {}) =>
    fetch(`${base}/console/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams({ token }).toString(),
    });

  it('the sign-in page is a plain form: no script, nothing set', async () => {
    const page = await fetch(`${base}/console`);
    expect(page.status).toBe(401);
    const html = await page.text();
    expect(html).toMatch(/<form method="post" action="\/console\/login">/);
    expect(html).not.toMatch(/<script|document\.cookie/);
    expect(page.headers.get('set-cookie')).toBeNull();
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'.*form-action 'self'/);
  });

  it.each([
    ['a wrong token', 'not-the-token-at-all-0000'],
    ['the token with a space added', `${TOKEN} `],
    ['an empty token', ''],
  ])('%s gets the page again with the reason, and no cookie', async (_what, token) => {
    const r = await login(token);
    expect(r.status).toBe(401);
    expect(await r.text()).toMatch(/not the admin token/);
    expect(r.headers.get('set-cookie')).toBeNull();
  });

  it('the right token: 303 to the console with HttpOnly SameSite=Strict cookies for /console and /admin, holding no token', async () => {
    const r = await login(TOKEN);
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe('/console');
    const cookies = r.headers.getSetCookie();
    expect(cookies.map((c) => / Path=([^;]+)/.exec(c)?.[1])).toEqual(['/console', '/admin']);
    for (const c of cookies) {
      expect(c).toMatch(/; HttpOnly/);
      expect(c).toMatch(/; SameSite=Strict/);
      expect(c).not.toMatch(/Secure/); // plain http: a Secure cookie would never come back
      expect(c).not.toContain(TOKEN);
    }
    const cookie = cookies[0]!.split(';')[0]!;
    // The cookie opens the console and the admin API; without it both stay shut.
    expect((await fetch(`${base}/console`, { headers: { cookie } })).status).toBe(200);
    expect((await fetch(`${base}/admin/stats`, { headers: { cookie } })).status).toBe(200);
    expect((await fetch(`${base}/admin/stats`)).status).toBe(403);
    expect((await fetch(`${base}/admin/stats`, { headers: { cookie: `${cookie}x` } })).status).toBe(403);
    expect((await fetch(`${base}/admin/stats`, { headers: { cookie: `msgx_console=${TOKEN}` } })).status).toBe(403);
  });

  it('behind https (X-Forwarded-Proto) the cookies are Secure; sign-out clears them', async () => {
    const r = await login(TOKEN, { 'x-forwarded-proto': 'https' });
    for (const c of r.headers.getSetCookie()) expect(c).toMatch(/; Secure/);
    const out = await fetch(`${base}/console/logout`, { method: 'POST', redirect: 'manual' });
    expect(out.status).toBe(303);
    const cleared = out.headers.getSetCookie();
    expect(cleared).toHaveLength(2);
    for (const c of cleared) expect(c).toMatch(/^msgx_console=; .*Max-Age=0/);
  });

  it.each([
    ['16 spaces', ' '.repeat(16)],
    ['a space inside', 'abcdefgh ijklmnopq'],
    ['15 characters', 'abcdefghijklmno'],
    ['a tab', 'abcdefgh\tijklmnopq'],
  ])('an admin token of %s is refused at start, naming MSGX_ADMIN_TOKEN and the rule', (_what, token) => {
    expect(() => loadConfig({ MSGX_ADMIN_TOKEN: token })).toThrow(/MSGX_ADMIN_TOKEN: must be at least 16 characters, all visible ASCII/);
  });
});
