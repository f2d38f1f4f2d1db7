import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AccessKey, verifySigV4 } from '../helpers/sigv4Verify.ts';

/**
 * The CLI from a laptop against the cloud API: `bin/msgx.mjs` run as a user runs it, with test
 * credentials in the environment (the default chain's first source), against a local server that
 * checks SigV4 the way API Gateway does (test/helpers/sigv4Verify.ts: the canonical request rebuilt
 * from what arrived, by hand, not with the signer the CLI uses) and answers like the admin API.
 */
const ROOT = resolve(import.meta.dirname, '..', '..');
const run = promisify(execFile);
const KEY_ID = 'AKIDMSGXTEST0000';
const SECRET = 'msgx-test-secret-key/0123456789abcdefghij';
const TOKEN = 'msgx-test-session-token';
const REGION = 'eu-west-1';

const KEYS: AccessKey[] = [
  {
    accessKeyId: KEY_ID,
    secretAccessKey: SECRET,
    sessionToken: TOKEN,
    principal: 'arn:aws:sts::210987654321:assumed-role/msgx-operator/cli',
  },
];

/** The reason a request's SigV4 signature does not verify, or undefined when it does. */
function verify(req: { method: string; url: string; headers: Record<string, string>; body: Buffer }): string | undefined {
  const r = verifySigV4(req, KEYS, { region: REGION });
  return r.ok ? undefined : r.reason;
}

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: Buffer;
  refused?: string;
}

let server: Server;
let base: string;
const seen: Seen[] = [];
/** What the API's admin routes answer (the CLI renders these). */
const ANSWERS: Record<string, unknown> = {
  'GET /admin/stats': {
    at: '2026-12-02T00:00:00.000Z',
    paused: false,
    pipeline: { backlog: 0, head: null, byStatus: { SUCCEEDED: 3 } },
    ordering: {},
    events: [],
    deadEvents: [],
    txmsg: {},
  },
  'GET /admin/dead': { kind: 'proc', items: [] },
  'POST /admin/replay': { dryRun: true, moved: [{ msgId: 7, status: 'DEAD' }], refused: [], warnings: [] },
  'POST /admin/pause': { paused: true, changed: true },
  'POST /admin/resume': { paused: false, changed: true },
};

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

beforeAll(async () => {
  server = createServer((req, res) => {
    void body(req).then((b) => {
      const s: Seen = { method: req.method!, url: req.url!, headers: req.headers as Record<string, string>, body: b };
      s.refused = verify(s);
      seen.push(s);
      const answer = ANSWERS[`${req.method} ${new URL(req.url!, 'http://x').pathname}`];
      if (s.refused) res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ message: s.refused }));
      else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer ?? { error: 'not_found' }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server?.close());

/** Runs the CLI with only the test credentials in the default chain (no profile, no instance metadata). */
async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MSGX_') && !k.startsWith('AWS_')));
  try {
    const r = await run(process.execPath, [join(ROOT, 'bin/msgx.mjs'), ...args], {
      cwd: ROOT,
      env: {
        ...clean,
        MSGX_API_URL: base,
        MSGX_API_SIGV4: '1',
        AWS_REGION: REGION,
        AWS_ACCESS_KEY_ID: KEY_ID,
        AWS_SECRET_ACCESS_KEY: SECRET,
        AWS_SESSION_TOKEN: TOKEN,
        AWS_CONFIG_FILE: '/dev/null',
        AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
        AWS_EC2_METADATA_DISABLED: 'true',
        ...env,
      },
    });
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('the CLI signs its calls to the cloud API (SigV4)', () => {
  it('status, dead, trace, replay, pause and resume reach the API signed, and every signature verifies', async () => {
    seen.length = 0;
    expect(await cli(['status', '--json'])).toMatchObject({ code: 0 });
    expect(await cli(['dead', '--kind', 'proc', '--limit', '5'])).toMatchObject({ code: 0 });
    await cli(['trace', '42', '--json']); // answered not_found by this server; what matters is the signed request
    const replay = await cli(['replay', '--kind', 'proc', '--ids', '7', '--dry-run']);
    expect(replay).toMatchObject({ code: 0, stdout: expect.stringMatching(/^would move 1/) });
    expect(await cli(['pause'])).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^pipeline paused: .*\(the API at 127\.0\.0\.1:\d+ \(SigV4, eu-west-1\)\)/),
    });
    expect(await cli(['resume'])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^pipeline running/) });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'GET /admin/stats',
      'GET /admin/dead?kind=proc&limit=5',
      'GET /admin/trace/42',
      'POST /admin/replay',
      'POST /admin/pause',
      'POST /admin/resume',
    ]);
    expect(seen.map((s) => s.refused)).toEqual(seen.map(() => undefined));
    expect(JSON.parse(seen[3]!.body.toString())).toEqual({ kind: 'proc', dryRun: true, ids: [7] });
  }, 300_000);

  it('a tampered request fails verification: another body, another path, another secret', async () => {
    seen.length = 0;
    await cli(['replay', '--kind', 'proc', '--ids', '7', '--dry-run']);
    const signed = seen[0]!;
    expect(signed.refused).toBeUndefined();
    const resend = (url: string, b: string) =>
      fetch(`${base}${url}`, {
        method: 'POST',
        headers: Object.fromEntries(Object.entries(signed.headers).filter(([k]) => !['host', 'content-length', 'connection'].includes(k))),
        body: b,
      });
    const tamperedBody = signed.body.toString().replace('"dryRun":true', '"dryRun":false');
    expect((await resend('/admin/replay', tamperedBody)).status).toBe(403);
    expect((await resend('/admin/pause', signed.body.toString())).status).toBe(403);
    expect(seen.slice(1).map((s) => s.refused)).toEqual(['the signature does not match', 'the signature does not match']);
    // The same request replayed unchanged still verifies: the check is not refusing everything.
    expect((await resend('/admin/replay', signed.body.toString())).status).toBe(200);

    const wrong = await cli(['status'], { AWS_SECRET_ACCESS_KEY: 'not-the-secret-key-of-this-key-id-000000' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^msgx: 403 .*the signature does not match/);
  }, 300_000);

  it('without credentials it says it cannot sign, and sends nothing', async () => {
    seen.length = 0;
    const r = await cli(['status'], { AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '', AWS_SESSION_TOKEN: '' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^msgx: cannot sign the request to 127\.0\.0\.1:\d+: .*give AWS credentials/);
    expect(seen).toEqual([]);
  }, 300_000);
});
