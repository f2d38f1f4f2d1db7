import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { pumpOnce } from '../../lib/pipeline/pump.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/shared/context.ts';
import { defaultRegistry } from '../../lib/shared/registry.ts';
import { loadCorpus, timeDecoder } from '../fixtures/hostile/corpus.ts';
import { buildCorpus, HERE, manifestOf, SETUP_FLIGHTS, SETUP_TEXT } from '../fixtures/hostile/generate.ts';
import { drainPoller, makeContext } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, type TestMysql, type TestPg } from '../helpers/services.ts';

/**
 * The hostile corpus (test/fixtures/hostile, ≥ 200 cases) through the real decoder, pump and flight
 * processors: written into the mailbox as other systems write it, and posted to the ingress. Each
 * case ends with its expected terminal state and class (or the ingress's 4xx, nothing stored), and
 * the process stays up. Decoder timings are printed as a bench figure, never asserted.
 */
const corpus = loadCorpus();

interface ProcRow {
  msg_id: number;
  status: string;
  error_class: string | null;
  error_detail: string | null;
  note: string | null;
}

async function pipelineContext(pg: TestPg, my: TestMysql, clock: FakeClock): Promise<AppContext> {
  return makeContext({ db: pg.db, mailbox: my.mailbox, clock, registry: defaultRegistry(), env: { MSGX_LOG_LEVEL: 'SILENT' } });
}

/** Polls, then pumps until idle; a FAILED head waiting for its backoff moves the fake clock on. */
async function drain(ctx: AppContext, clock: FakeClock): Promise<void> {
  await drainPoller(ctx);
  for (let i = 0; i < 5000; i++) {
    const r = await pumpOnce(ctx);
    if (r.kind === 'idle') return;
    if (r.kind === 'waiting') clock.advance(Math.max(1, r.untilMs - clock.now().getTime()));
  }
  throw new Error('pump still busy after 5,000 steps');
}

function mismatch(name: string, row: ProcRow | undefined, expect: (typeof corpus)[number]['expect']): string | null {
  if (!row) return `${name}: no proc_state row`;
  const reason = `${row.error_detail ?? ''} ${row.note ?? ''}`;
  if (row.status !== expect.status || (row.error_class ?? undefined) !== expect.errorClass || (expect.reason && !reason.includes(expect.reason)))
    return `${name}: ${row.status}(${row.error_class ?? ''}) "${reason.trim().slice(0, 160)}", expected ${expect.status}(${expect.errorClass ?? ''}) "${expect.reason ?? ''}"`;
  return null;
}

async function assertStillSound(pg: TestPg): Promise<void> {
  // Nothing dropped, nothing polluted: the setup flights and every table are still there.
  const f = await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM flight_schd WHERE flid = ANY($1)`, [SETUP_FLIGHTS]);
  expect(f.rows[0]!.n).toBe(SETUP_FLIGHTS.length);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect(Object.prototype.hasOwnProperty.call(Object.prototype, 'polluted')).toBe(false);
}

it('the corpus holds at least 200 cases, and the committed files are what generate.ts writes', () => {
  expect(corpus.length).toBeGreaterThanOrEqual(200);
  const built = buildCorpus();
  const manifest = manifestOf(built);
  expect(JSON.parse(readFileSync(join(HERE, 'manifest.json'), 'utf8'))).toEqual(manifest);
  built.forEach((c, i) => {
    if (manifest[i]!.file) expect(readFileSync(join(HERE, manifest[i]!.file!), 'utf8'), c.name).toBe(c.text);
  });
  const kinds = ['billion-laughs', 'numeric-ref', 'repeated-doctype', 'deep-nesting', 'mib', 'bom', 'declared-', 'meta-without', 'js-name-__proto__', 'schd-cnt', 'sql-'];
  for (const k of kinds) expect(corpus.some((c) => c.name.includes(k)), k).toBe(true);
});

describe('written into the mailbox as other systems write it', () => {
  let pg: TestPg;
  let my: TestMysql;
  beforeAll(async () => {
    pg = await freshPg();
    my = await freshMysql();
  });
  afterAll(async () => {
    await my?.drop();
    await pg?.drop();
  });

  it('every case ends with its terminal state and class; the pump survives all of them', async () => {
    const clock = new FakeClock('2026-11-29T01:00:00Z');
    const ctx = await pipelineContext(pg, my, clock);
    await my.mailbox.insertInbound(SETUP_TEXT);
    const ids = new Map<string, number>();
    for (const c of corpus) ids.set(c.name, await my.mailbox.insertInbound(c.text));
    const started = performance.now();
    await drain(ctx, clock);
    const pumpMs = performance.now() - started;

    const rows = await pg.db.query<ProcRow>(`SELECT msg_id, status, error_class, error_detail, note FROM proc_state`);
    const byId = new Map(rows.rows.map((r) => [r.msg_id, r]));
    const wrong = corpus.map((c) => mismatch(c.name, byId.get(ids.get(c.name)!), c.expect)).filter(Boolean);
    expect(wrong).toEqual([]);
    await assertStillSound(pg);
    // Every outcome is back-filled for the mailbox owner, DEAD ones with their class.
    const unmarked = await my.mailbox.filterUnprocessed([...ids.values()]);
    expect(unmarked).toEqual([]);

    const timings = timeDecoder({ runs: 3 });
    const bombs = timings.filter((t) => /laughs|blowup|xxe|doctype|entity-decl/.test(t.name));
    console.log(
      `[faults:hostile] ${corpus.length} cases pumped in ${Math.round(pumpMs)} ms; slowest decodes: ` +
        timings.slice(0, 3).map((t) => `${t.name} ${t.ms.toFixed(1)} ms (${t.bytes} B)`).join(', ') +
        `; slowest bomb ${bombs[0]?.name} ${bombs[0]?.ms.toFixed(3)} ms`,
    );
  });
});

describe('posted to POST /cminmsgs/send', () => {
  let pg: TestPg;
  let my: TestMysql;
  let server: Server;
  let base: string;
  let ctx: AppContext;
  const clock = new FakeClock('2026-11-29T01:00:00Z');
  beforeAll(async () => {
    pg = await freshPg();
    my = await freshMysql();
    ctx = await pipelineContext(pg, my, clock);
    server = await startHttpServer(ctx, buildRouter(), { port: 0 });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server?.close();
    await my?.drop();
    await pg?.drop();
  });

  it('the ingress refuses what it must with the right 4xx and stores nothing; what it accepts ends as in the mailbox', async () => {
    const send = (body: string) => fetch(`${base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body });
    const count = async () => (await my.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM CMINMSGS'))[0]!.n;
    expect((await send(SETUP_TEXT)).status).toBe(200);
    const wrong: string[] = [];
    const accepted = new Map<string, number>();
    for (const c of corpus) {
      const before = await count();
      const res = await send(c.text);
      const body = await res.text();
      if (c.expect.http !== undefined) {
        let detail = '';
        try {
          const json = JSON.parse(body) as { error: string; detail: string };
          detail = json.detail;
          if (!json.error) wrong.push(`${c.name}: no error code in ${body.slice(0, 100)}`);
        } catch {
          wrong.push(`${c.name}: answer is not JSON: ${body.slice(0, 100)}`);
        }
        if (res.status !== c.expect.http) wrong.push(`${c.name}: HTTP ${res.status} "${body.slice(0, 120)}", expected ${c.expect.http}`);
        else if (c.expect.reason && !detail.includes(c.expect.reason) && c.expect.http !== 413)
          wrong.push(`${c.name}: reason "${detail}" does not say "${c.expect.reason}"`);
        if ((await count()) !== before) wrong.push(`${c.name}: refused but stored`);
      } else if (res.status !== 200) wrong.push(`${c.name}: HTTP ${res.status} "${body.slice(0, 160)}", expected 200`);
      else accepted.set(c.name, Number(body));
    }
    expect(wrong).toEqual([]);
    // Still up and answering.
    expect((await fetch(`${base}/health`)).status).toBeLessThan(600);
    expect(server.listening).toBe(true);

    await drain(ctx, clock);
    const rows = await pg.db.query<ProcRow>(`SELECT msg_id, status, error_class, error_detail, note FROM proc_state`);
    const byId = new Map(rows.rows.map((r) => [r.msg_id, r]));
    const ends = corpus.filter((c) => accepted.has(c.name)).map((c) => mismatch(c.name, byId.get(accepted.get(c.name)!), c.expect)).filter(Boolean);
    expect(ends).toEqual([]);
    await assertStillSound(pg);
  });
});
