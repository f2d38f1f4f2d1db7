import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { pumpOnce } from '../../lib/pipeline/pump.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { defaultRegistry } from '../../lib/app/registry.ts';
import { loadCorpus, timeDecoder } from '../fixtures/hostile/corpus.ts';
import { buildCorpus, HERE, manifestOf, SETUP_FLIGHTS, SETUP_TEXT } from '../fixtures/hostile/generate.ts';
import { drainPoller, makeContext } from '../helpers/pipeline.ts';
import { useFreshDatabases } from '../helpers/freshDatabases.ts';
import type { TestMysql, TestPg } from '../helpers/services.ts';

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
  if (
    row.status !== expect.status ||
    (row.error_class ?? undefined) !== expect.errorClass ||
    (expect.reason && !reason.includes(expect.reason))
  )
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

/** What msgx wrote because of these messages: flight versions, events, snapshot-log rows. */
async function writtenBy(pg: TestPg, ids: number[]): Promise<string[]> {
  const r = await pg.db.query<{ what: string; msg_id: string }>(
    `SELECT 'flight ' || flid AS what, last_msg_id::text AS msg_id FROM flight_schd WHERE last_msg_id = ANY($1::bigint[])
     UNION ALL SELECT 'flight history ' || flid, last_msg_id::text FROM flight_hst WHERE last_msg_id = ANY($1::bigint[])
     UNION ALL SELECT 'event ' || target || ' ' || event_id, source_id FROM msg_event WHERE source_kind = 'proc' AND source_id = ANY($1::text[])
     UNION ALL SELECT 'snapshot log ' || id, msg_id::text FROM schd_snap_log WHERE msg_id = ANY($1::bigint[])`,
    [ids],
  );
  return r.rows.map((x) => `${x.what} by message ${x.msg_id}`);
}

/**
 * The cases whose reason says the content is "stored as received" or "kept verbatim": the unknown
 * FLIGHT child after FLID, as the test reads it from the raw text (a chain of same-line elements
 * around one text, its references replaced as XML says), must appear so in the flight's state event.
 */
const VERBATIM = /stored as received|kept verbatim/;
const PREDEFINED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
/** The text an XML reader gets from raw character data: predefined entities and character references replaced. */
const xmlText = (raw: string) =>
  raw.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|amp|lt|gt|quot|apos);/g, (_, r: string) =>
    r.startsWith('#x')
      ? String.fromCodePoint(parseInt(r.slice(2), 16))
      : r.startsWith('#')
        ? String.fromCodePoint(Number(r.slice(1)))
        : PREDEFINED[r]!,
  );
function expectedVerbatim(text: string): { flid: string; json: Record<string, unknown> } {
  const m = /<FLID>([^<]*)<\/FLID>((?:<[^/>][^>]*>)+)([^<]*)</.exec(text);
  if (!m) throw new Error(`no FLIGHT child after FLID in ${text.slice(0, 200)}`);
  const names = [...m[2]!.matchAll(/<([^/>]+)>/g)].map((x) => x[1]!);
  let value: unknown = xmlText(m[3]!);
  for (const n of names.reverse()) value = { [n]: value };
  return { flid: m[1]!, json: value as Record<string, unknown> };
}

async function verbatimMismatches(pg: TestPg, cases: { name: string; text: string; id: number }[]): Promise<string[]> {
  const wrong: string[] = [];
  for (const c of cases) {
    const want = expectedVerbatim(c.text);
    const r = await pg.db.query<{ value: string }>(
      `SELECT value FROM msg_event WHERE target = 'schd' AND source_kind = 'proc' AND source_id = $1::text`,
      [c.id],
    );
    if (r.rowCount !== 1) {
      wrong.push(`${c.name}: ${r.rowCount} schd events, expected 1`);
      continue;
    }
    const got = JSON.parse(r.rows[0]!.value) as Record<string, unknown>;
    if (got.FLID !== want.flid) wrong.push(`${c.name}: event for ${String(got.FLID)}, expected ${want.flid}`);
    for (const [k, v] of Object.entries(want.json))
      if (JSON.stringify(got[k]) !== JSON.stringify(v))
        wrong.push(`${c.name}: ${k} is ${JSON.stringify(got[k])?.slice(0, 120)}, sent ${JSON.stringify(v).slice(0, 120)}`);
  }
  return wrong;
}

it('the corpus holds at least 200 cases, and the committed files are what generate.ts writes', () => {
  expect(corpus.length).toBeGreaterThanOrEqual(200);
  const built = buildCorpus();
  const manifest = manifestOf(built);
  expect(JSON.parse(readFileSync(join(HERE, 'manifest.json'), 'utf8'))).toEqual(manifest);
  built.forEach((c, i) => {
    if (manifest[i]!.file) expect(readFileSync(join(HERE, manifest[i]!.file), 'utf8'), c.name).toBe(c.text);
  });
  const kinds = [
    'billion-laughs',
    'numeric-ref',
    'repeated-doctype',
    'deep-nesting',
    'mib',
    'bom',
    'declared-',
    'meta-without',
    'js-name-__proto__',
    'schd-cnt',
    'sql-',
  ];
  for (const k of kinds)
    expect(
      corpus.some((c) => c.name.includes(k)),
      k,
    ).toBe(true);
});

describe('written into the mailbox as other systems write it', () => {
  const dbs = useFreshDatabases();

  it('every case ends with its terminal state and class; the pump survives all of them', async () => {
    const clock = new FakeClock('2026-11-29T01:00:00Z');
    const ctx = await pipelineContext(dbs.pg, dbs.my, clock);
    await dbs.my.mailbox.insertInbound(SETUP_TEXT);
    const ids = new Map<string, number>();
    for (const c of corpus) ids.set(c.name, await dbs.my.mailbox.insertInbound(c.text));
    const started = performance.now();
    await drain(ctx, clock);
    const pumpMs = performance.now() - started;

    const rows = await dbs.pg.db.query<ProcRow>(`SELECT msg_id, status, error_class, error_detail, note FROM proc_state`);
    const byId = new Map(rows.rows.map((r) => [r.msg_id, r]));
    const wrong = corpus.map((c) => mismatch(c.name, byId.get(ids.get(c.name)!), c.expect)).filter(Boolean);
    expect(wrong).toEqual([]);
    await assertStillSound(dbs.pg);
    // Every outcome is back-filled for the mailbox owner, DEAD ones with their class.
    const unmarked = await dbs.my.mailbox.filterUnprocessed([...ids.values()]);
    expect(unmarked).toEqual([]);
    // A dead message changed nothing: no flight version, no event, no snapshot-log row.
    const dead = corpus.filter((c) => c.expect.status === 'DEAD');
    expect(dead.filter((c) => c.expect.errorClass === 'PROTOCOL').length).toBeGreaterThan(0);
    expect(
      await writtenBy(
        dbs.pg,
        dead.map((c) => ids.get(c.name)!),
      ),
    ).toEqual([]);
    // The same query does see what a succeeded message wrote (so the empty answer above means something).
    const succeeded = corpus.filter((c) => c.expect.status === 'SUCCEEDED').map((c) => ids.get(c.name)!);
    expect((await writtenBy(dbs.pg, succeeded)).length).toBeGreaterThanOrEqual(succeeded.length);
    // What the reason says is kept as received is in the flight's state exactly as sent.
    const verbatim = corpus.filter((c) => c.expect.status === 'SUCCEEDED' && VERBATIM.test(c.why ?? ''));
    expect(verbatim.length).toBeGreaterThanOrEqual(10);
    expect(
      await verbatimMismatches(
        dbs.pg,
        verbatim.map((c) => ({ name: c.name, text: c.text, id: ids.get(c.name)! })),
      ),
    ).toEqual([]);

    const timings = timeDecoder({ runs: 3 });
    const bombs = timings.filter((t) => /laughs|blowup|xxe|doctype|entity-decl/.test(t.name));
    console.log(
      `[faults:hostile] ${corpus.length} cases pumped in ${Math.round(pumpMs)} ms; slowest decodes: ` +
        timings
          .slice(0, 3)
          .map((t) => `${t.name} ${t.ms.toFixed(1)} ms (${t.bytes} B)`)
          .join(', ') +
        `; slowest bomb ${bombs[0]?.name} ${bombs[0]?.ms.toFixed(3)} ms`,
    );
  });
});

describe('posted to POST /cminmsgs/send', () => {
  const dbs = useFreshDatabases();
  let server: Server;
  let base: string;
  let ctx: AppContext;
  const clock = new FakeClock('2026-11-29T01:00:00Z');
  beforeAll(async () => {
    ctx = await pipelineContext(dbs.pg, dbs.my, clock);
    server = await startHttpServer(ctx, buildRouter(), { port: 0 });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server?.close();
  });

  it('the ingress refuses what it must with the right 4xx and stores nothing; what it accepts ends as in the mailbox', async () => {
    const send = (body: string) => fetch(`${base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body });
    // Everything a request could leave behind, in both databases.
    const count = async () => {
      const mb = await dbs.my.query<{ inbound: number; outbound: number }[]>(
        'SELECT (SELECT COUNT(*) FROM CMINMSGS) AS inbound, (SELECT COUNT(*) FROM COUTMSGS) AS outbound',
      );
      const r = await dbs.pg.db.query<Record<string, number>>(
        `SELECT (SELECT count(*)::int FROM proc_state) AS proc, (SELECT count(*)::int FROM proc_attempt) AS attempts,
                (SELECT count(*)::int FROM msg_event) AS events, (SELECT count(*)::int FROM flight_schd) AS flights,
                (SELECT count(*)::int FROM schd_snap_log) AS snapshots, (SELECT count(*)::int FROM backfill_todo) AS todos`,
      );
      return JSON.stringify({ ...mb[0], ...r.rows[0] });
    };
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
        else if (c.expect.reason && !detail.includes(c.expect.reason))
          wrong.push(`${c.name}: reason "${detail}" does not say "${c.expect.reason}"`);
        if ((await count()) !== before) wrong.push(`${c.name}: refused but stored`);
      } else if (res.status !== 200) wrong.push(`${c.name}: HTTP ${res.status} "${body.slice(0, 160)}", expected 200`);
      else accepted.set(c.name, Number(body));
    }
    expect(wrong).toEqual([]);
    expect(accepted.size).toBe(corpus.filter((c) => c.expect.http === undefined).length);
    // Stored as received: every accepted body is in the mailbox byte for byte.
    const stored = await dbs.my.query<{ ID: number; MSG_TEXT: string }[]>('SELECT ID, MSG_TEXT FROM CMINMSGS WHERE ID IN (?)', [
      [...accepted.values()],
    ]);
    const textOf = new Map(stored.map((r) => [Number(r.ID), r.MSG_TEXT]));
    const altered = corpus.filter((c) => accepted.has(c.name) && textOf.get(accepted.get(c.name)!) !== c.text).map((c) => c.name);
    expect(altered).toEqual([]);
    // Still up and answering.
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    expect(server.listening).toBe(true);

    await drain(ctx, clock);
    const rows = await dbs.pg.db.query<ProcRow>(`SELECT msg_id, status, error_class, error_detail, note FROM proc_state`);
    const byId = new Map(rows.rows.map((r) => [r.msg_id, r]));
    const ends = corpus
      .filter((c) => accepted.has(c.name))
      .map((c) => mismatch(c.name, byId.get(accepted.get(c.name)!), c.expect))
      .filter(Boolean);
    expect(ends).toEqual([]);
    const dead = corpus.filter((c) => accepted.has(c.name) && c.expect.status === 'DEAD');
    expect(
      await writtenBy(
        dbs.pg,
        dead.map((c) => accepted.get(c.name)!),
      ),
    ).toEqual([]);
    const verbatim = corpus.filter((c) => accepted.has(c.name) && c.expect.status === 'SUCCEEDED' && VERBATIM.test(c.why ?? ''));
    expect(
      await verbatimMismatches(
        dbs.pg,
        verbatim.map((c) => ({ name: c.name, text: c.text, id: accepted.get(c.name)! })),
      ),
    ).toEqual([]);
    await assertStillSound(dbs.pg);
  });
});
