import { type Summary, summarize } from './stats.ts';

/** One reported figure: a median over runs, its spread, and (when the issue sets one) its target. */
export interface Figure {
  id: string;
  label: string;
  unit: string;
  better: 'higher' | 'lower';
  median: number;
  min: number;
  max: number;
  runs: number[];
  target?: { op: '>=' | '<' | '<='; value: number };
  pass?: boolean;
  /** Drawn in latest.svg. */
  headline?: boolean;
  note?: string;
}

export interface ScenarioResult {
  scenario: string;
  title: string;
  figures: Figure[];
  notes: string[];
  meta: Record<string, unknown>;
  skipped?: string;
  seconds?: number;
}

export interface RunOptions {
  quick: boolean;
  runs: number;
  /** Figures of scenarios that ran earlier in this invocation (by figure id). */
  earlier: Map<string, Figure>;
}

export function figure(
  id: string,
  label: string,
  unit: string,
  runs: number[],
  o: { better?: 'higher' | 'lower'; target?: { op: '>=' | '<' | '<='; value: number }; headline?: boolean; note?: string } = {},
): Figure {
  const s: Summary = summarize(runs.filter((x) => Number.isFinite(x)));
  const better = o.better ?? (o.target && o.target.op !== '>=' ? 'lower' : 'higher');
  const f: Figure = { id, label, unit, better, median: s.median, min: s.min, max: s.max, runs, headline: o.headline, note: o.note };
  if (o.target) {
    f.target = o.target;
    f.pass =
      o.target.op === '>=' ? s.median >= o.target.value : o.target.op === '<=' ? s.median <= o.target.value : s.median < o.target.value;
  }
  return f;
}

/** Per-run ratios a[i]/b[i] (paired runs of the same invocation). */
export const ratios = (a: number[], b: number[]) => a.map((x, i) => x / b[Math.min(i, b.length - 1)]!);
