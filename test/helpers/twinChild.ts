import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { waitFor } from './services.ts';

/**
 * The twin as a user runs it (`npm start`), in a child process so tests can stop it by SIGTERM or
 * SIGKILL and start it again on the same directory. Embedded defaults unless `env` sets URLs.
 */
const ROOT = resolve(import.meta.dirname, '..', '..');
const running = new Set<ChildProcess>();

/** Kills every twin a test left running (afterAll). */
export function killTwins(): void {
  for (const c of running) c.kill('SIGKILL');
}

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

export interface Twin {
  child: ChildProcess;
  base: string;
  output(): string;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal: NodeJS.Signals): Promise<number | null>;
}

/** Spawns the twin; resolves once /health answers 200 (rejects with its output if it exits first). */
export async function startTwin(env: Record<string, string>, cwd: string): Promise<Twin> {
  const run = spawnTwin(env, cwd, await freePort());
  const exited = run.exited.then((code) => {
    throw new Error(`the twin exited with ${code}: ${run.output()}`);
  });
  exited.catch(() => {});
  await Promise.race([
    exited,
    waitFor(async () => (await fetch(`${run.base}/health`)).status === 200, { timeoutMs: 150_000, what: 'the twin to answer /health' }),
  ]);
  return run;
}

/** Spawns the twin without waiting for it: for starts that are expected to be refused. */
export function spawnTwin(env: Record<string, string>, cwd: string, port = 0): Twin & { exited: Promise<number | null> } {
  const p = port || 20_000 + Math.floor(Math.random() * 20_000);
  // The twin runs in a directory of its own (its .msgx/ lands there): load tsx by absolute path.
  const tsx = join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs');
  const child = spawn(process.execPath, ['--import', tsx, join(ROOT, 'lib/twin/main.ts')], {
    cwd,
    env: {
      ...process.env,
      MSGX_PG_URL: '',
      MSGX_MAILBOX_URL: '',
      MSGX_KAFKA_BROKERS: '',
      MSGX_POLL_INTERVAL_MS: '200',
      MSGX_SCHD_FLUSH_PERIOD: '200ms',
      ...env,
      MSGX_HTTP_PORT: env.MSGX_HTTP_PORT ?? String(p),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = once(child, 'exit').then(([code]) => {
    running.delete(child);
    return code as number | null;
  });
  return {
    child,
    base: `http://127.0.0.1:${env.MSGX_HTTP_PORT ?? p}`,
    output: () => output,
    exited,
    async stop(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
