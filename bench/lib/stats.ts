/** Small statistics helpers: every headline figure is a median over runs with its min–max spread. */

export function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

export const median = (xs: number[]) => quantile(xs, 0.5);

export interface Summary {
  median: number;
  min: number;
  max: number;
  runs: number[];
}

export function summarize(runs: number[]): Summary {
  return { median: median(runs), min: Math.min(...runs), max: Math.max(...runs), runs };
}

/** Latency percentiles of one run (ms). */
export function latency(samples: number[]): { p50: number; p99: number; max: number; n: number } {
  return { p50: quantile(samples, 0.5), p99: quantile(samples, 0.99), max: Math.max(...samples), n: samples.length };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
