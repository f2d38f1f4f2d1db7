/** Plain text tables for people: aligned columns, a header rule, nothing fancy. */
export function table(rows: Record<string, unknown>[], columns?: string[]): string {
  if (rows.length === 0) return '(none)';
  const cols = columns ?? Object.keys(rows[0]!);
  const cell = (v: unknown) => (v === null || v === undefined ? '' : v instanceof Date ? v.toISOString() : typeof v === 'object' ? JSON.stringify(v) : String(v));
  const data = rows.map((r) => cols.map((c) => cell(r[c])));
  const widths = cols.map((c, i) => Math.min(60, Math.max(c.length, ...data.map((d) => d[i]!.length))));
  const line = (cells: string[]) => cells.map((v, i) => (v.length > widths[i]! ? `${v.slice(0, widths[i]! - 1)}…` : v.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(cols), widths.map((w) => '-'.repeat(w)).join('  '), ...data.map(line)].join('\n');
}

/** key: value lines for one record. */
export function keyValues(obj: Record<string, unknown>): string {
  const width = Math.max(...Object.keys(obj).map((k) => k.length));
  return Object.entries(obj)
    .map(([k, v]) => `${k.padEnd(width)}  ${v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join('\n');
}
