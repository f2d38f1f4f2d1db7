import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { waitFor } from '../helpers/services.ts';
import { twinCli } from '../helpers/twinCli.ts';
import { freePort } from '../helpers/twinChild.ts';

/**
 * The README's stop-and-start, exactly as a user does it: `npm start` in a terminal (its own
 * process group, like a shell's foreground job), stopped with `kill -TERM <pid of npm start>` or
 * with Ctrl-C (SIGINT to the whole group) while it is busy, and `npm start` again on the same data.
 * docs/twin.md promises a clean stop either way: workers finish or roll back, the database is
 * closed, `.msgx/pg.lock` is removed, nothing is left running. The journey is judged from outside:
 * the processes of the group, the port, the lock file the docs name, the twin's own output, and a
 * model of the flight built from what was sent (its last gate and its version count).
 *
 * It was red before the start script exec'd node itself: `kill -TERM` of npm killed only the
 * `sh -c` between them and left the twin running orphaned, still answering and holding the
 * lock; and tsx's CLI, between sh and the twin, SIGKILLs its child when the child does not
 * confirm a signal within 60 ms, which a twin busy in an embedded-database commit cannot.
 */
const ROOT = resolve(import.meta.dirname, '..', '..');
const DAY = '20261129';
const FLID = '7001';
/** More than one pump step takes (8 groups of 50): a Ctrl-C during the first step leaves work behind. */
const BURST = 600;
const dataDir = mkdtempSync(join(tmpdir(), 'msgx-npm-start-'));
const started: ChildProcess[] = [];

afterAll(() => {
  for (const c of started) if (groupAlive(c)) process.kill(-c.pid!, 'SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

/** True while any process of the group `npm start` leads is alive. */
function groupAlive(c: ChildProcess): boolean {
  try {
    process.kill(-c.pid!, 0);
    return true;
  } catch {
    return false;
  }
}

interface Run {
  child: ChildProcess;
  base: string;
  output(): string;
}

async function npmStart(port: number, env: Record<string, string> = {}): Promise<Run> {
  const child = spawn('npm', ['start'], {
    cwd: ROOT,
    detached: true, // a group of its own, as a terminal gives a foreground job
    env: {
      ...process.env,
      MSGX_PG_URL: '',
      MSGX_MAILBOX_URL: '',
      MSGX_KAFKA_BROKERS: '',
      MSGX_DATA_DIR: dataDir,
      MSGX_HTTP_PORT: String(port),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const base = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${base}/health`)).status === 200, {
    timeoutMs: 150_000,
    what: `npm start to answer /health (output: ${output.slice(-400)})`,
  });
  return { child, base, output: () => output };
}

/** Waits until every process of the group is gone, then checks what a clean stop leaves. */
async function expectCleanStop(run: Run, how: string): Promise<void> {
  await waitFor(() => !groupAlive(run.child), { timeoutMs: 60_000, what: `every process of npm start to exit after ${how}` });
  await expect(fetch(`${run.base}/health`)).rejects.toThrow();
  expect(run.output(), `the twin logs its shutdown after ${how}`).toContain('"message":"shutting down"');
  expect(existsSync(join(dataDir, 'pg.lock')), `pg.lock removed after ${how}`).toBe(false);
}

async function send(base: string, xml: string): Promise<number> {
  const r = await fetch(`${base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: xml });
  expect(r.status).toBe(200);
  return Number(await r.text());
}

describe('npm start, stopped and started again as the README says', () => {
  it('kill -TERM of npm start, and Ctrl-C while it works, stop the twin cleanly; nothing acknowledged is lost', async () => {
    const port = await freePort();
    // The model: which gate each acknowledged message set, by mailbox ID.
    const gateById = new Map<number, string>();

    const first = await npmStart(port);
    const plan = flight({ FLID, OPDY: DAY, AWCD: 'CZ', FLNO: '7001', STAT: 'SCH', GATE: [{ CODE: 'A1', BEG: `${DAY}090000`, END: '' }] });
    await send(first.base, schd('DNLD', { seqn: 'plan', dttm: `${DAY}050000`, opdy: DAY, flights: [plan] }));
    await waitFor(async () => (await fetch(`${first.base}/v1/flights/${FLID}`)).status === 200, { what: 'the flight to exist' });
    process.kill(first.child.pid!, 'SIGTERM'); // `kill -TERM <pid>`: the pid the shell printed for npm start
    await expectCleanStop(first, 'kill -TERM of npm start');

    // Again on the same data; Ctrl-C while the pump works through a burst just acknowledged. The
    // burst is taken in while paused and the Ctrl-C sent once the pump is seen on it, so the stop
    // lands mid-burst by what happened, not by how fast this machine is.
    const second = await npmStart(port);
    expect(await twinCli(second.base, 'pause')).toMatch(/paused/);
    const ids = await Promise.all(
      Array.from({ length: BURST }, async (_, i) => {
        const gate = `G${i}`;
        const xml = flop(
          'GATE',
          { seqn: `g${i}`, dttm: `${DAY}060000` },
          flight({ FLID, GATE: [{ CODE: gate, BEG: `${DAY}090000`, END: '' }] }),
        );
        const id = await send(second.base, xml);
        gateById.set(id, gate);
        return id;
      }),
    );
    expect(await twinCli(second.base, 'resume')).toMatch(/running/);
    await waitFor(
      async () => ((await (await fetch(`${second.base}/v1/flights/${FLID}`)).json()) as { stateVersion: number }).stateVersion > 1,
      { timeoutMs: 60_000, intervalMs: 5, what: 'the pump to start on the burst' },
    );
    process.kill(-second.child.pid!, 'SIGINT');
    await expectCleanStop(second, 'Ctrl-C while busy');

    // And again, paused at start (MSGX_START_PAUSED), so what the stop left is seen before any
    // of it moves: the Ctrl-C really came while work remained, and every acknowledged message is
    // either applied or waiting — none lost.
    const third = await npmStart(port, { MSGX_START_PAUSED: '1' });
    const atStop = ((await (await fetch(`${third.base}/v1/flights/${FLID}`)).json()) as { stateVersion: number }).stateVersion;
    const stats = (await (await fetch(`${third.base}/admin/stats`)).json()) as { paused: boolean; pipeline: { backlog: number } };
    expect(stats.paused).toBe(true);
    expect(atStop, 'the Ctrl-C came while the pump still had work').toBeLessThan(1 + ids.length);
    expect(stats.pipeline.backlog, `acknowledged, not applied at version ${atStop}: waiting`).toBe(1 + ids.length - atStop);
    // The work accepted before the stop carries on after the resume.
    expect(await twinCli(third.base, 'resume')).toMatch(/running/);
    const lastGate = gateById.get(Math.max(...ids))!;
    const f = await waitFor(
      async () => {
        const body = (await (await fetch(`${third.base}/v1/flights/${FLID}`)).json()) as { stateVersion: number; GATE: { CODE: string }[] };
        return body.stateVersion === 1 + ids.length ? body : undefined;
      },
      { timeoutMs: 60_000, what: `flight ${FLID} at version ${1 + ids.length}` },
    );
    expect(f.GATE.map((g) => g.CODE)).toEqual([lastGate]);
    process.kill(-third.child.pid!, 'SIGINT');
    await expectCleanStop(third, 'Ctrl-C');
  });
});
