import { execFile } from 'node:child_process';
import { request as httpRequest, type Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { Router } from '../../lib/http/router.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { makeContext, wire } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, type TestMysql, type TestPg } from '../helpers/services.ts';

/**
 * The twin's HTTP server on a developer's machine, over real HTTP: web pages cannot drive it
 * (forged Host, foreign Origin, cross-site form posts), bad requests get a 4xx with a reason and
 * never a 500 with internals, and bodies are bounded in size and in time. Every refusal is also
 * checked to have changed nothing, judged from outside (the admin API, the mailbox table).
 */
const LIMIT = 4096;

describe('twin HTTP server: safe on a laptop', () => {
  let pg: TestPg;
  let my: TestMysql;
  let ctx: AppContext;
  let server: Server;
  let port: number;

  beforeAll(async () => {
    pg = await freshPg();
    my = await freshMysql();
    ctx = makeContext({
      db: pg.db,
      mailbox: my.mailbox,
      clock: systemClock,
      env: {
        MSGX_MAX_BODY_BYTES: String(LIMIT),
        MSGX_HTTP_REQUEST_TIMEOUT: '1500ms',
        MSGX_TX_CHECK_ALLOWED_ORIGINS: 'http://127.0.0.1:9',
        MSGX_LOG_LEVEL: 'SILENT',
      },
    });
    server = await startHttpServer(ctx, buildRouter(), { port: 0 });
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server?.close();
    await my?.drop();
    await pg?.drop();
  });

  interface Answer {
    status: number;
    headers: Record<string, string | string[] | undefined>;
    text: string;
    json: { error?: string; detail?: string; [k: string]: unknown };
  }

  /** One request with exactly these headers (fetch would not let a test forge Host). */
  const call = (method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method, path, headers: { host: `127.0.0.1:${port}`, ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json = {};
          try {
            json = JSON.parse(text);
          } catch {
            /* not JSON: left empty, the test says what it expects */
          }
          resolve({ status: res.statusCode!, headers: res.headers, text, json });
        });
      });
      req.on('error', reject);
      req.end(body);
    });

  const paused = async () => {
    const r = await call('GET', '/admin/stats');
    expect(r.status).toBe(200);
    return r.json.paused as boolean;
  };
  const mailboxCount = async () => (await my.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM CMINMSGS'))[0]!.n;
  const txCount = async () => (await pg.db.query<{ n: number }>('SELECT count(*)::int AS n FROM tx_message')).rows[0]!.n;
  const deadCount = async () => ((await call('GET', '/admin/dead?kind=proc')).json.items as unknown[]).length;
  const ownOrigin = () => `http://127.0.0.1:${port}`;
  const prepareBody = (extra: Record<string, unknown> = {}) =>
    JSON.stringify({ topic: 'orders', payload: { n: 1 }, checkUrl: 'http://127.0.0.1:9/check', ...extra });

  describe('Host: only the names the twin is reached by (DNS rebinding)', () => {
    it.each(['127.0.0.1', 'localhost', '[::1]'])('answers Host %s on its own port', async (name) => {
      const r = await call('GET', '/admin/stats', { host: `${name}:${port}` });
      expect(r.status).toBe(200);
    });

    it.each([
      ['a rebinding domain', () => `evil.example:${port}`],
      ['a loopback name on another port', () => `localhost:${port + 1}`],
      ['a name without the port', () => 'localhost'],
      ['garbage', () => 'a b/c'],
    ])('refuses %s with 403 naming the Host, reading nothing and changing nothing', async (_what, host) => {
      const read = await call('GET', '/admin/stats', { host: host() });
      expect(read.status).toBe(403);
      expect(read.json).toMatchObject({ error: 'host_not_allowed' });
      expect(read.json.detail).toMatch(/MSGX_HTTP_ALLOWED_HOSTS/);
      expect(read.text).not.toMatch(/"pipeline"|"paused"/);

      const write = await call('POST', '/admin/pause', { host: host(), 'content-type': 'application/json' }, '{}');
      expect(write.status).toBe(403);
      expect(await paused()).toBe(false);
    });

    it('answers a name listed in MSGX_HTTP_ALLOWED_HOSTS, on any port when listed without one', async () => {
      const listed = makeContext({
        db: pg.db,
        mailbox: my.mailbox,
        clock: systemClock,
        env: { MSGX_HTTP_ALLOWED_HOSTS: 'msgx, other.test:81', MSGX_LOG_LEVEL: 'SILENT' },
      });
      const s = await startHttpServer(
        listed,
        new Router([{ method: 'GET', path: '/ping', handle: async () => ({ status: 200, body: 'pong' }) }]),
        { port: 0 },
      );
      const p = (s.address() as AddressInfo).port;
      const get = (host: string) =>
        new Promise<number>((resolve, reject) =>
          httpRequest({ host: '127.0.0.1', port: p, path: '/ping', headers: { host } }, (res) => (res.resume(), resolve(res.statusCode!)))
            .on('error', reject)
            .end(),
        );
      try {
        expect(await get(`msgx:${p}`)).toBe(200);
        expect(await get('msgx:1234')).toBe(200);
        expect(await get('other.test:81')).toBe(200);
        expect(await get(`other.test:${p}`)).toBe(403);
        expect(await get(`evil.example:${p}`)).toBe(403);
      } finally {
        s.close();
      }
    });
  });

  describe('cross-site requests may not change state', () => {
    it('a cross-site <form enctype="text/plain"> cannot pause the pipeline', async () => {
      const r = await call(
        'POST',
        '/admin/pause',
        { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' },
        '{"x":"=y"}',
      );
      expect(r.status).toBe(403);
      expect(r.json).toMatchObject({ error: 'cross_site_request' });
      expect(r.json.detail).toMatch(/cross-site/);
      expect(await paused()).toBe(false);
    });

    it('a foreign Origin cannot post a message, prepare a tx-message or replay, even with the right content type', async () => {
      const [mailbox, tx, dead] = [await mailboxCount(), await txCount(), await deadCount()];
      const evil = { origin: 'http://evil.example' };
      const send = await call('POST', '/cminmsgs/send', { ...evil, 'content-type': 'text/plain' }, wire({ TYPE: 'LDM', SEQN: 1 }));
      expect(send.status).toBe(403);
      expect(send.json.detail).toMatch(/origin http:\/\/evil\.example/);
      const prep = await call('POST', '/v1/tx-messages', { ...evil, 'content-type': 'application/json' }, prepareBody());
      expect(prep.status).toBe(403);
      const replay = await call(
        'POST',
        '/admin/replay',
        { ...evil, 'content-type': 'application/json' },
        '{"kind":"proc","errorClass":"MALFORMED"}',
      );
      expect(replay.status).toBe(403);
      // Another local app (another port) and sandboxed or file: pages ("null") are foreign too.
      expect((await call('POST', '/admin/pause', { origin: `http://localhost:${port + 1}` })).status).toBe(403);
      expect((await call('POST', '/admin/pause', { origin: 'null' })).status).toBe(403);
      expect((await call('POST', '/admin/pause', { 'sec-fetch-site': 'same-site' })).status).toBe(403);
      expect([await mailboxCount(), await txCount(), await deadCount(), await paused()]).toEqual([mailbox, tx, dead, false]);
    });

    it('the twin own pages (same origin) and clients without Origin (curl, the CLI) still work', async () => {
      const same = { origin: ownOrigin(), 'sec-fetch-site': 'same-origin', 'content-type': 'application/json' };
      expect((await call('POST', '/admin/pause', same)).status).toBe(200);
      expect(await paused()).toBe(true);
      expect((await call('POST', '/admin/resume', { 'content-type': 'application/json' })).status).toBe(200);
      expect(await paused()).toBe(false);
      const before = await mailboxCount();
      const sent = await call('POST', '/cminmsgs/send', { 'content-type': 'application/xml' }, wire({ TYPE: 'LDM', SEQN: 2 }));
      expect(sent.status).toBe(200);
      expect(await mailboxCount()).toBe(before + 1);
    });

    it('JSON routes require application/json: a text/plain body is 415 and stores nothing', async () => {
      const before = await txCount();
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
        const r = await call('POST', '/v1/tx-messages', { 'content-type': type }, prepareBody());
        expect(r.status).toBe(415);
        expect(r.json).toMatchObject({ error: 'unsupported_media_type' });
        expect(r.json.detail).toMatch(/send application\/json/);
      }
      const missing = await call('POST', '/v1/tx-messages', {}, prepareBody());
      expect(missing.status).toBe(415);
      expect((await call('POST', '/admin/pause', { 'content-type': 'text/plain' })).status).toBe(415);
      expect(await paused()).toBe(false);
      expect(await txCount()).toBe(before);
      const ok = await call('POST', '/v1/tx-messages', { 'content-type': 'application/json; charset=utf-8' }, prepareBody());
      expect(ok.status).toBe(201);
      expect(await txCount()).toBe(before + 1);
    });
  });

  describe('bad requests get a 4xx with the reason, never a 500 with internals', () => {
    const noInternals = (a: Answer) => {
      expect(a.status).toBeGreaterThanOrEqual(400);
      expect(a.status).toBeLessThan(500);
      expect(typeof a.json.error).toBe('string');
      expect(typeof a.json.detail).toBe('string');
      expect(a.text).not.toContain(process.cwd());
      expect(a.text).not.toMatch(/\/(work|home|usr|tmp)\/|\bat \w+ \(|node:internal|ENOENT|stack/);
    };

    it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'])(
      '/console/%s is 404, not a file lookup',
      async (name) => {
        const r = await call('GET', `/console/${name}`);
        noInternals(r);
        expect(r.status).toBe(404);
        expect(r.json.detail).toMatch(/no console asset/);
      },
    );

    it('a path segment that is not valid percent-encoding is 400', async () => {
      for (const path of ['/v1/flights/%zz', '/v1/tx-messages/%E0%A4%A', '/admin/trace/%']) {
        const r = await call('GET', path);
        noInternals(r);
        expect(r.status).toBe(400);
        expect(r.json.detail).toMatch(/percent-encoding/);
      }
    });

    it('a NUL in a tx-message id, key, payload or query is 400 and stores nothing', async () => {
      const before = await txCount();
      for (const [method, path] of [
        ['GET', '/v1/tx-messages/a%00b'],
        ['POST', '/v1/tx-messages/a%00b/commit'],
        ['GET', '/v1/flights/%00'],
      ] as const) {
        const r = await call(method, path);
        noInternals(r);
        expect(r.status).toBe(400);
        expect(r.json.detail).toMatch(/NUL/);
      }
      for (const extra of [{ key: 'a\u0000b' }, { payload: { 'x\u0000': 1 } }, { headers: { h: '\u0000' } }]) {
        const r = await call('POST', '/v1/tx-messages', { 'content-type': 'application/json' }, prepareBody(extra));
        noInternals(r);
        expect(r.status).toBe(400);
        expect(r.json.detail).toMatch(/NUL/);
      }
      const q = await call('GET', '/admin/dead?kind=proc&errorClass=%00');
      noInternals(q);
      expect(q.json.detail).toMatch(/errorClass.*NUL/);
      expect(await txCount()).toBe(before);
    });

    it('a check URL with a fragment is 400 naming it, and nothing is stored', async () => {
      const before = await txCount();
      const r = await call(
        'POST',
        '/v1/tx-messages',
        { 'content-type': 'application/json' },
        prepareBody({ checkUrl: 'http://127.0.0.1:9/check#frag' }),
      );
      noInternals(r);
      expect(r.status).toBe(400);
      expect(r.json.detail).toMatch(/^checkUrl: must not contain a fragment/);
      expect(await txCount()).toBe(before);
    });

    it('deeply nested JSON is 400 naming the depth, not a stack overflow', async () => {
      const before = await txCount();
      const deep = `{"topic":"orders","checkUrl":"http://127.0.0.1:9/c","payload":${'['.repeat(1500)}${']'.repeat(1500)}}`;
      const r = await call('POST', '/v1/tx-messages', { 'content-type': 'application/json' }, deep);
      noInternals(r);
      expect(r.status).toBe(400);
      expect(r.json.detail).toMatch(/nested deeper than \d+ levels/);
      expect(await txCount()).toBe(before);
    });

    it.each([
      ['/admin/dead?limit=-1', /limit: must be at least 1/],
      ['/admin/dead?limit=abc', /limit: must be an integer/],
      ['/admin/dead?limit=100000', /limit: must be at most 1000/],
      ['/admin/dead?kind=nope', /kind: must be proc, event or txmsg/],
      ['/admin/throughput?minutes=0', /minutes: must be at least 1/],
    ])('%s is 400 naming the parameter', async (path, reason) => {
      const r = await call('GET', path);
      noInternals(r);
      expect(r.status).toBe(400);
      expect(r.json.detail).toMatch(reason);
    });

    it('a body that is JSON but not an object is 400, not a TypeError', async () => {
      for (const body of ['null', '[1]', '"x"', '{"kind":']) {
        const r = await call('POST', '/admin/replay', { 'content-type': 'application/json' }, body);
        noInternals(r);
        expect(r.status).toBe(400);
      }
    });

    it('an unexpected error is a 500 with a generic detail: no message, path or stack', async () => {
      const boom = new Router([
        {
          method: 'GET',
          path: '/boom',
          handle: async () => {
            throw new Error(`ENOENT: no such file or directory, open '${process.cwd()}/secret'`);
          },
        },
      ]);
      const s = await startHttpServer(ctx, boom, { port: 0 });
      const p = (s.address() as AddressInfo).port;
      try {
        const res = await fetch(`http://127.0.0.1:${p}/boom`);
        expect(res.status).toBe(500);
        const text = await res.text();
        expect(JSON.parse(text)).toEqual({ error: 'internal', detail: expect.stringMatching(/server log/) });
        expect(text).not.toContain(process.cwd());
        expect(text).not.toContain('ENOENT');
      } finally {
        s.close();
      }
    });
  });

  describe('bodies are bounded in size and time', () => {
    /** A raw connection, for what no well-behaved client does. */
    const open = () =>
      new Promise<Socket>((resolve, reject) => {
        const s = connect(port, '127.0.0.1', () => resolve(s));
        s.on('error', reject);
      });
    /** Everything the server sent until it closed the connection. */
    const untilClosed = (s: Socket) =>
      new Promise<string>((resolve) => {
        const chunks: Buffer[] = [];
        s.on('data', (c: Buffer) => chunks.push(c));
        s.on('error', () => {});
        s.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
      });
    const head = (extra: string) =>
      `POST /cminmsgs/send HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/xml\r\n${extra}\r\n`;

    it('a Content-Length over the limit is refused with 413 before any body byte is sent', async () => {
      const before = await mailboxCount();
      const s = await open();
      const reply = untilClosed(s);
      s.write(head(`Content-Length: ${20 * 1024 * 1024}\r\n`)); // headers only: not one body byte
      const text = await reply;
      expect(text).toMatch(/^HTTP\/1\.1 413 /);
      expect(text).toMatch(/"error":"payload_too_large"/);
      expect(text).toMatch(/larger than 4096 bytes/);
      expect(await mailboxCount()).toBe(before);
    });

    it('a chunked body is cut off at the limit: 413 and the connection closed long before 20 MiB', async () => {
      const before = await mailboxCount();
      const s = await open();
      const reply = untilClosed(s);
      let closed = false;
      s.on('close', () => (closed = true));
      s.write(head('Transfer-Encoding: chunked\r\n'));
      const chunk = Buffer.alloc(64 * 1024, 'x');
      let written = 0;
      while (!closed && written < 20 * 1024 * 1024) {
        const flushed = s.write(`${chunk.length.toString(16)}\r\n${chunk.toString()}\r\n`);
        written += chunk.length;
        if (!flushed) await new Promise<void>((r) => (closed ? r() : (s.once('drain', r), s.once('close', r))));
      }
      const text = await reply;
      expect(text).toMatch(/^HTTP\/1\.1 413 /);
      expect(text).toMatch(/larger than 4096 bytes/);
      // The server stopped reading: the client could not get 20 MiB out (kernel buffers hold a few).
      expect(written).toBeLessThan(20 * 1024 * 1024);
      expect(await mailboxCount()).toBe(before);
    });

    /**
     * Node's fetch (undici) in its own process, as an upstream producer is: it writes the whole
     * body before it reads the answer, so a server that closes on unread data resets the
     * connection and the client sees EPIPE instead of the 413. (In the test's own process the
     * client's reads interleave with the server's writes and the race hardly ever shows.)
     */
    const fetchInChild = (mib: number, times: number) =>
      new Promise<string[]>((resolve, reject) => {
        const script = `
          const out = [];
          for (let i = 0; i < ${times}; i++) {
            try {
              const res = await fetch('http://127.0.0.1:${port}/cminmsgs/send', {
                method: 'POST', headers: { 'content-type': 'application/xml' }, body: Buffer.alloc(${mib} * 1024 * 1024, 120),
              });
              const body = await res.json();
              out.push(res.status + ' ' + body.error + ': ' + body.detail);
            } catch (err) {
              out.push(String(err.cause?.code ?? err));
            }
          }
          console.log(JSON.stringify(out));`;
        execFile(process.execPath, ['--input-type=module', '-e', script], (err, stdout, stderr) =>
          err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout) as string[]),
        );
      });

    it.each([2, 6])(
      'a %i MiB body posted by Node fetch 20 times gets 20 × 413, never EPIPE (the rest is read and discarded)',
      async (mib) => {
        const before = await mailboxCount();
        const answers = await fetchInChild(mib, 20);
        expect(answers).toEqual(Array.from({ length: 20 }, () => '413 payload_too_large: the body is larger than 4096 bytes'));
        expect(await mailboxCount()).toBe(before);
      },
    );

    it('a client that stops sending its headers is cut off too (node headersTimeout = MSGX_HTTP_REQUEST_TIMEOUT)', async () => {
      const s = await open();
      const reply = untilClosed(s);
      s.write(`GET /admin/stats HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: `); // never finished
      expect(await reply).toMatch(/^HTTP\/1\.1 408 /);
    });

    it('a client that stops sending its body gets 408 after MSGX_HTTP_REQUEST_TIMEOUT and is disconnected', async () => {
      const before = await mailboxCount();
      const s = await open();
      const reply = untilClosed(s);
      s.write(head('Content-Length: 100\r\n') + '<MSG>'); // 5 of 100 bytes, then nothing
      const text = await reply; // the server closes the connection; the test's own timeout is the bound
      expect(text).toMatch(/^HTTP\/1\.1 408 /);
      expect(text).toMatch(/"error":"request_timeout"/);
      expect(text).toMatch(/did not arrive within 1500 ms/);
      expect(await mailboxCount()).toBe(before);
    });
  });
});
