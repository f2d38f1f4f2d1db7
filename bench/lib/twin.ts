import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { call } from './http.ts';
import { sleep } from './stats.ts';

const root = join(import.meta.dirname, '..', '..');

/**
 * The twin (`lib/twin/main.ts`, every role) as a child process; resolves once /health is 200.
 * `MSGX_BENCH_TWIN_NODE_ARGS` adds node options to it only (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`).
 */
export async function startTwin(env: Record<string, string>, port: number): Promise<ChildProcess> {
  const extra = (process.env.MSGX_BENCH_TWIN_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...extra, '--import', 'tsx', 'lib/twin/main.ts'], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`twin exited ${child.exitCode}: ${stderr}`);
    const ok = await call(port, 'GET', '/health').catch(() => null);
    if (ok?.status === 200) return child;
    await sleep(200);
  }
  child.kill('SIGKILL');
  throw new Error(`twin not healthy within 60 s: ${stderr}`);
}

export async function stopTwin(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(10_000)]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const v = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(v[11]) + Number(v[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

/** Peak resident set (VmHWM) of a live process, in MiB. */
export function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}
