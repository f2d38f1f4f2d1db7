import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { sleep } from './stats.ts';

function cpuTimes(): { idle: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = v[3]! + (v[4] ?? 0);
  return { idle, total: v.reduce((a, b) => a + b, 0) };
}

/** Share of all CPUs busy over `ms` (this process is idle meanwhile, so it is other work). */
export async function busyShare(ms = 1000): Promise<number> {
  const a = cpuTimes();
  await sleep(ms);
  const b = cpuTimes();
  const total = b.total - a.total;
  return total > 0 ? 1 - (b.idle - a.idle) / total : 0;
}

/**
 * The machine is shared (other test runs, builds): before a scenario, wait up to `maxWaitMs` for
 * other work to fall below `threshold` of the CPUs. Returns what was seen, for the results.
 */
export async function waitForQuiet(maxWaitMs: number, threshold = 0.25, log?: (s: string) => void) {
  const started = Date.now();
  let busy = await busyShare();
  let told = false;
  while (busy > threshold && Date.now() - started < maxWaitMs) {
    if (!told)
      log?.(`other work is using ${(busy * 100).toFixed(0)}% of the CPUs; waiting up to ${Math.round(maxWaitMs / 1000)} s for quiet`);
    told = true;
    busy = await busyShare(2000);
  }
  return { busyPct: Math.round(busy * 100), waitedS: Math.round((Date.now() - started) / 1000), load1: Number(loadavg()[0]!.toFixed(2)) };
}
