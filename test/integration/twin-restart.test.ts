import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { fileSink } from '../helpers/fileSink.ts';
import { waitFor } from '../helpers/services.ts';
import { killTwins, spawnTwin, startTwin } from '../helpers/twinChild.ts';

/**
 * The twin on its embedded default (`npm start`: PGlite under .msgx/, mailbox tables in it, file
 * sink) stopped by SIGTERM and by SIGKILL and started again on the same directory; started on a
 * directory an older version made; started twice at once. Judged only from outside: HTTP answers,
 * the file sink, the process's exit code and output, against a model of what was acknowledged.
 */
afterAll(killTwins);

const ROOT = resolve(import.meta.dirname, '..', '..');
const DAY = '20261129';
const FLIGHTS = Array.from({ length: 8 }, (_, i) => String(3001 + i));
const ORIGIN = 'http://127.0.0.1:9';
const ENV = { MSGX_TX_CHECK_ALLOWED_ORIGINS: ORIGIN };
let seqn = 1;

const gate = (code: string) => [{ CODE: code, BEG: `${DAY}093000`, END: `${DAY}101500` }];
const dayPlan = () =>
  schd('DNLD', {
    seqn: seqn++,
    dttm: `${DAY}080000`,
    opdy: DAY,
    flights: FLIGHTS.map((f) => flight({ FLID: f, OPDY: DAY, AWCD: 'CZ', FLNO: f, GATE: gate('A0') })),
  });
const gateChange = (flid: string, code: string) =>
  flop('GATE', { seqn: seqn++, dttm: `${DAY}090000` }, flight({ FLID: flid, GATE: gate(code) }));

async function post(base: string, xml: string): Promise<number> {
  const r = await fetch(`${base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: xml });
  expect(r.status, await r.clone().text()).toBe(200);
  return Number(await r.text());
}

async function postTx(base: string, topic: string, payload: unknown): Promise<string> {
  const r = await fetch(`${base}/v1/tx-messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ topic, key: 'k', payload, checkUrl: `${ORIGIN}/check` }),
  });
  expect(r.status).toBe(201);
  const { id } = (await r.json()) as { id: string };
  const c = await fetch(`${base}/v1/tx-messages/${id}/commit`, { method: 'POST' });
  expect(c.status).toBe(200);
  return id;
}

async function admin(base: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body ?? {}) });
}

/** Gate codes by flight as the twin's read API shows them. */
async function gates(base: string): Promise<Record<string, string | undefined>> {
  const r = await fetch(`${base}/v1/flights?day=${DAY}`);
  const body = (await r.json()) as { flights: { FLID: string; GATE?: { CODE: string }[] }[] };
  return Object.fromEntries(body.flights.map((f) => [f.FLID, f.GATE?.[0]?.CODE]));
}

async function waitForGates(base: string, want: Record<string, string>, what: string) {
  let last: Record<string, string | undefined> = {};
  await waitFor(
    async () => {
      last = await gates(base);
      return Object.entries(want).every(([f, code]) => last[f] === code);
    },
    { timeoutMs: 60_000, what: `${what} (last seen ${JSON.stringify(last)})` },
  );
}

/** Records of a file-sink topic (the twin's stand-in for Kafka) of the twin running in `dir`. */
const sink = (dir: string, topic: string) => fileSink(join(dir, '.msgx'), topic);

const sinkPayloads = (dir: string, topic: string) => sink(dir, topic).map((l) => JSON.parse(l.value) as { n: number });

function oneLineRefusal(output: string): string {
  const lines = output.trim().split('\n');
  expect(lines, output).toHaveLength(1);
  expect(output, 'no stack trace').not.toMatch(/^\s+at /m);
  return lines[0]!;
}

describe('the embedded twin across restarts', () => {
  it('SIGTERM, then start again on the same data: state intact, pending work resumes, new work flows', { timeout: 400_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'msgx-restart-'));
    const topic = 'restart.term';
    const first = await startTwin(ENV, dir);
    await post(first.base, dayPlan());
    await waitForGates(first.base, Object.fromEntries(FLIGHTS.map((f) => [f, 'A0'])), 'the day plan');
    // Paused: what is accepted now stays pending across the stop.
    expect((await admin(first.base, '/admin/pause')).status).toBe(200);
    const want: Record<string, string> = Object.fromEntries(FLIGHTS.map((f) => [f, 'A0']));
    for (const f of FLIGHTS.slice(0, 4)) {
      await post(first.base, gateChange(f, `B${f}`));
      want[f] = `B${f}`;
    }
    const tx1 = await postTx(first.base, topic, { n: 1 });
    expect(await first.stop('SIGTERM')).toBe(0);

    const second = await startTwin(ENV, dir);
    expect(second.output()).not.toMatch(/migration \d+\/\d+ applied/);
    // The pause survived the restart: still accepting, then resumed by the operator.
    expect((await admin(second.base, '/admin/resume')).status).toBe(200);
    await waitForGates(second.base, want, 'the gate changes accepted before the stop');
    await waitFor(() => sinkPayloads(dir, topic).some((p) => p.n === 1), { timeoutMs: 30_000, what: 'tx 1 in the file sink' });
    const view = (await (await fetch(`${second.base}/v1/tx-messages/${tx1}`)).json()) as { status: string };
    expect(['DELIVERED', 'CONSUMED']).toContain(view.status);

    await post(second.base, gateChange(FLIGHTS[5]!, 'C1'));
    want[FLIGHTS[5]!] = 'C1';
    await postTx(second.base, topic, { n: 2 });
    await waitForGates(second.base, want, 'new work after the restart');
    await waitFor(() => sinkPayloads(dir, topic).some((p) => p.n === 2), { timeoutMs: 30_000, what: 'tx 2 in the file sink' });
    // Every flight change reached the msgx.msg topic: the day plan's 8 and 5 changes since.
    await waitFor(() => sink(dir, 'msgx.msg').length >= FLIGHTS.length + 5, { timeoutMs: 30_000, what: 'msgx.msg events' });
    expect(await second.stop('SIGTERM')).toBe(0);
  });

  it('SIGKILL mid-work: nothing acknowledged is lost, and the next start carries on', { timeout: 500_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'msgx-restart-'));
    const topic = 'restart.kill';
    let twin = await startTwin(ENV, dir);
    await post(twin.base, dayPlan());
    // Each flight has one writer posting changes one after another: its final gate is the last
    // acknowledged change, or the one in flight at the kill if that was stored before dying.
    const acked: Record<string, string> = Object.fromEntries(FLIGHTS.map((f) => [f, 'A0']));
    const inFlight: Record<string, string | undefined> = {};
    const txAcked: number[] = [];
    /** Every payload the test tried to prepare, acknowledged or not (one in flight at a kill may still commit). */
    const txTried = new Set<number>();
    for (let round = 0; round < 2; round++) {
      let ackedNow = 0;
      const killAfter = 30 + round * 10;
      let killed = false;
      const victim = twin;
      const writers = FLIGHTS.map(async (f) => {
        for (let j = 0; !killed; j++) {
          const code = `K${round}${j}`;
          inFlight[f] = code;
          try {
            const r = await fetch(`${victim.base}/cminmsgs/send`, {
              method: 'POST',
              headers: { 'content-type': 'application/xml' },
              body: gateChange(f, code),
            });
            if (r.status !== 200) return;
            acked[f] = code;
            inFlight[f] = undefined;
            ackedNow++;
          } catch {
            return; // the connection died with the twin: not acknowledged
          }
        }
      });
      const txWriter = (async () => {
        for (let n = round * 1000; !killed; n++) {
          txTried.add(n);
          try {
            const r = await fetch(`${victim.base}/v1/tx-messages`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ topic, key: 'k', payload: { n }, checkUrl: `${ORIGIN}/check` }),
            });
            if (r.status !== 201) throw new Error(`prepare answered ${r.status}: ${await r.text()}`);
            const { id } = (await r.json()) as { id: string };
            const c = await fetch(`${victim.base}/v1/tx-messages/${id}/commit`, { method: 'POST' });
            if (c.status !== 200) throw new Error(`commit answered ${c.status}: ${await c.text()}`);
            txAcked.push(n);
          } catch (err) {
            if (err instanceof Error && /answered/.test(err.message)) throw err;
            return; // the connection died with the twin: not acknowledged
          }
        }
      })();
      const txBefore = txAcked.length;
      await waitFor(() => ackedNow >= killAfter && txAcked.length >= txBefore + 2, {
        timeoutMs: 60_000,
        what: `${killAfter} acknowledged changes and 2 tx-messages`,
      });
      killed = true;
      expect(await victim.stop('SIGKILL')).toBe(null);
      await Promise.all([...writers, txWriter]);
      twin = await startTwin(ENV, dir);
    }
    await waitFor(
      async () => {
        const seen = await gates(twin.base);
        return FLIGHTS.every((f) => seen[f] === acked[f] || (inFlight[f] !== undefined && seen[f] === inFlight[f]));
      },
      { timeoutMs: 90_000, what: `every flight at its last acknowledged gate ${JSON.stringify(acked)}` },
    );
    const delivered = await waitFor(
      () => {
        const got = new Set(sinkPayloads(dir, topic).map((p) => p.n));
        return txAcked.every((n) => got.has(n)) ? got : null;
      },
      { timeoutMs: 60_000, what: `every acknowledged tx-message (${txAcked.length}) delivered to the file sink` },
    );
    // Nothing reached the sink that the producer did not send.
    expect([...delivered].filter((n) => !txTried.has(n))).toEqual([]);

    await post(twin.base, gateChange(FLIGHTS[0]!, 'NEW'));
    await waitForGates(twin.base, { [FLIGHTS[0]!]: 'NEW' }, 'new work after the kills');
    expect(await twin.stop('SIGTERM')).toBe(0);
  });

  it('a data directory made by an older version: the newer migrations apply, its data stays', { timeout: 400_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'msgx-restart-'));
    // The older version: the same code with only the first three migrations shipped.
    const older = join(dir, 'older-migrations');
    const all = readdirSync(join(ROOT, 'migrations'))
      .filter((f) => /^\d+_.+\.sql$/.test(f))
      .sort();
    expect(all.length).toBeGreaterThan(3);
    mkdirSync(older);
    for (const f of all.slice(0, 3)) cpSync(join(ROOT, 'migrations', f), join(older, f));
    cpSync(join(ROOT, 'migrations', 'mailbox-pg'), join(older, 'mailbox-pg'), { recursive: true });
    const old = await startTwin({ ...ENV, MSGX_MIGRATIONS_DIR: older }, dir);
    expect(old.output()).toMatch(new RegExp(`migration 3/3 applied`));
    await post(old.base, dayPlan());
    await post(old.base, gateChange(FLIGHTS[1]!, 'OLD'));
    expect(await old.stop('SIGTERM')).toBe(0);

    const twin = await startTwin(ENV, dir);
    const applied = [...twin.output().matchAll(/"migration (\d+)\/(\d+) applied"/g)].map((m) => Number(m[1]));
    expect(applied).toEqual(all.slice(3).map((_, i) => 4 + i));
    const want = Object.fromEntries(FLIGHTS.map((f) => [f, 'A0']));
    want[FLIGHTS[1]!] = 'OLD';
    await waitForGates(twin.base, want, 'what the older version accepted');
    // Work that needs the newer tables (transactional messages came later) flows.
    await postTx(twin.base, 'restart.upgrade', { n: 7 });
    await waitFor(() => sinkPayloads(dir, 'restart.upgrade').some((p) => p.n === 7), {
      timeoutMs: 30_000,
      what: 'the tx-message in the file sink',
    });
    expect(await twin.stop('SIGTERM')).toBe(0);
  });

  it(
    'two twins on one data directory: the second refuses in one line; a killed one leaves no lock behind',
    { timeout: 400_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'msgx-restart-'));
      const first = await startTwin(ENV, dir);
      await post(first.base, dayPlan());
      const second = spawnTwin(ENV, dir);
      expect(await second.exited).not.toBe(0);
      const line = oneLineRefusal(second.output());
      expect(line).toMatch(new RegExp(`in use by another msgx twin \\(pid ${first.child.pid}\\)`));
      // The first is unharmed.
      await post(first.base, gateChange(FLIGHTS[2]!, 'L1'));
      await waitForGates(first.base, { [FLIGHTS[2]!]: 'L1' }, 'the first twin still working');

      expect(await first.stop('SIGKILL')).toBe(null);
      const third = await startTwin(ENV, dir);
      await waitForGates(third.base, { [FLIGHTS[2]!]: 'L1', [FLIGHTS[3]!]: 'A0' }, 'state after the stale lock');
      expect(await third.stop('SIGTERM')).toBe(0);
    },
  );

  it('a data directory left unreadable: one line saying what to do, exit non-zero, nothing touched', { timeout: 300_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'msgx-restart-'));
    const twin = await startTwin(ENV, dir);
    expect(await twin.stop('SIGTERM')).toBe(0);
    // What a crash at the wrong moment (or a disk fault) can leave: the control file gone.
    rmSync(join(dir, '.msgx', 'pg', 'global', 'pg_control'));
    const broken = spawnTwin(ENV, dir);
    expect(await broken.exited).toBe(1);
    const line = oneLineRefusal(broken.output());
    expect(line).toMatch(
      /^msgx: the embedded database in \.msgx\/pg cannot be opened \(.*pg_control.*\).*mv \.msgx\/pg \.msgx\/pg\.broken/,
    );
    expect(existsSync(join(dir, '.msgx', 'pg', 'PG_VERSION'))).toBe(true);
    expect(existsSync(join(dir, '.msgx', 'pg.lock')), 'the refused start left no lock').toBe(false);
    writeFileSync(join(dir, 'unused'), '');
  });
});
