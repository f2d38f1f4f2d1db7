import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join, resolve } from 'node:path';
import { freePort } from './freePort.ts';
import { waitFor } from './services.ts';

/**
 * The twin as a user runs it (`npm start`), in a child process so tests can stop it by SIGTERM or
 * SIGKILL and start it again on the same directory. Embedded defaults unless `env` sets URLs.
 */
const ROOT = resolve(import.meta.dirname, '..', '..');
const running = new Set<ChildProcess>();

/** Also offered here, where tests found it before test/helpers/freePort.ts existed. */
export { freePort };

/** Kills every twin a test left running (afterAll). */
export function killTwins(): void {
  for (const c of running) c.kill('SIGKILL');
}

export interface Twin {
  child: ChildProcess;
  base: string;
  output(): string;
  /**
   * Sends `signal` and resolves with the exit code; with `killAfterMs`, a twin still running
   * that long after the signal is SIGKILLed.
   */
  stop(signal: NodeJS.Signals, o?: { killAfterMs?: number }): Promise<number | null>;
}

/** Spawns the twin; resolves once /health answers 200 (rejects with its output if it exits first). */
export async function startTwin(env: Record<string, string>, cwd: string): Promise<Twin> {
  return healthy(spawnTwin(env, cwd, await freePort()));
}

/**
 * The twin in the repository root with none of the caller's MSGX_ settings and none of
 * spawnTwin's defaults: only what `env` names is configured (the browser tests). Resolves once
 * /health answers 200.
 */
export async function startBareTwin(env: Record<string, string>): Promise<Twin> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MSGX_')));
  const port = env.MSGX_HTTP_PORT ?? String(await freePort());
  return healthy(launch({ ...inherited, ...env, MSGX_HTTP_PORT: port }, ROOT, port));
}

/** Spawns the twin without waiting for it: for starts that are expected to be refused. */
export function spawnTwin(env: Record<string, string>, cwd: string, port = 0): Twin & { exited: Promise<number | null> } {
  const p = env.MSGX_HTTP_PORT ?? String(port || 20_000 + Math.floor(Math.random() * 20_000));
  return launch(
    {
      ...process.env,
      MSGX_PG_URL: '',
      MSGX_MAILBOX_URL: '',
      MSGX_KAFKA_BROKERS: '',
      MSGX_POLL_INTERVAL_MS: '200',
      MSGX_SCHD_FLUSH_PERIOD: '200ms',
      ...env,
      MSGX_HTTP_PORT: p,
    },
    cwd,
    p,
  );
}

function launch(env: NodeJS.ProcessEnv, cwd: string, port: string): Twin & { exited: Promise<number | null> } {
  // The twin may run in a directory of its own (its .msgx/ lands there): load tsx by absolute path.
  const tsx = join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs');
  const child = spawn(process.execPath, ['--import', tsx, join(ROOT, 'lib/twin/main.ts')], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = once(child, 'exit').then(([code]) => {
    running.delete(child);
    return code as number | null;
  });
  return {
    child,
    base: `http://127.0.0.1:${port}`,
    output: () => output,
    exited,
    async stop(signal, o = {}) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      if (o.killAfterMs === undefined) return exited;
      const timer = setTimeout(() => child.kill('SIGKILL'), o.killAfterMs);
      return exited.finally(() => clearTimeout(timer));
    },
  };
}

/** Resolves with the twin once /health answers 200; rejects with its output if it exits first or never answers. */
async function healthy(run: Twin & { exited: Promise<number | null> }): Promise<Twin> {
  const exited = run.exited.then((code) => {
    throw new Error(`the twin exited with ${code}: ${run.output()}`);
  });
  exited.catch(() => {});
  await Promise.race([
    exited,
    waitFor(async () => (await fetch(`${run.base}/health`)).status === 200, {
      timeoutMs: 150_000,
      what: 'the twin to answer /health',
    }).catch((err: Error) => {
      throw new Error(`${err.message}\n${run.output().slice(-3000)}`);
    }),
  ]);
  return run;
}

/** A JSON call to a running twin: its status and parsed body (the journeys' view of the HTTP API). */
export async function callTwin(
  twin: Pick<Twin, 'base'>,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${twin.base}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
