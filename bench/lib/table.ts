import type { Figure, ScenarioResult } from './result.ts';

const num = (x: number, unit: string): string => {
  if (!Number.isFinite(x)) return '—';
  if (unit === 'x') return `${x.toFixed(2)}×`;
  if (unit === 'count') return x.toLocaleString('en-US', { maximumFractionDigits: 0 });
  const abs = Math.abs(x);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : 2;
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
};

export const fmtValue = (f: Figure) => `${num(f.median, f.unit)}${f.unit === 'x' ? '' : ` ${f.unit}`}`;
export const fmtSpread = (f: Figure) => (f.runs.length > 1 ? `${num(f.min, f.unit)}–${num(f.max, f.unit)}` : '');
export const fmtTarget = (f: Figure) =>
  f.target ? `${{ '>=': '≥', '<=': '≤', '<': '<' }[f.target.op]} ${num(f.target.value, f.unit)}${f.unit === 'x' ? '' : ` ${f.unit}`}` : '';
export const fmtPass = (f: Figure) => (f.pass === undefined ? '' : f.pass ? 'pass' : 'MISS');

/** Plain-text table for the terminal; `markdown` gives the same rows as a Markdown table. */
export function renderTable(results: ScenarioResult[], markdown = false): string {
  const rows: string[][] = [];
  for (const r of results) {
    if (r.skipped) {
      rows.push([r.scenario, `(skipped: ${r.skipped})`, '', '', '', '', '']);
      continue;
    }
    for (const f of r.figures) rows.push([r.scenario, f.label, fmtValue(f), fmtSpread(f), String(f.runs.length), fmtTarget(f), fmtPass(f)]);
  }
  const head = ['scenario', 'figure', 'median', 'min–max', 'runs', 'target', ''];
  if (markdown) {
    const esc = (s: string) => s.replaceAll('|', '\\|');
    return [
      `| ${head.join(' | ')} |`,
      `|${head.map((_, i) => (i >= 2 && i <= 4 ? '---:' : '---')).join('|')}|`,
      ...rows.map((r) => `| ${r.map((c, i) => (i === 6 && c === 'MISS' ? '**MISS**' : esc(c))).join(' | ')} |`),
    ].join('\n');
  }
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i >= 2 && i <= 4 ? c.padStart(width[i]!) : c.padEnd(width[i]!)))
      .join('  ')
      .trimEnd();
  let last = '';
  const out = [line(head), width.map((w) => '-'.repeat(w)).join('  ')];
  for (const r of rows) {
    if (last && r[0] !== last) out.push('');
    last = r[0]!;
    out.push(line(r));
  }
  return out.join('\n');
}
