/** Plain text tables for people: aligned columns, a header rule, nothing fancy. */
export function table(rows: Record<string, unknown>[], columns?: string[]): string {
  if (rows.length === 0) return '(none)';
  const cols = columns ?? Object.keys(rows[0]!);
  const cell = (v: unknown) =>
    v === null || v === undefined ? '' : v instanceof Date ? v.toISOString() : typeof v === 'object' ? JSON.stringify(v) : String(v);
  const data = rows.map((r) => cols.map((c) => cell(r[c])));
  // Columns are capped at 60 characters to stay readable, except the last: a reason there is read whole.
  const last = cols.length - 1;
  const widths = cols.map((c, i) => Math.max(c.length, ...data.map((d) => d[i]!.length)));
  const shown = widths.map((w, i) => (i === last ? w : Math.min(60, w)));
  const line = (cells: string[]) =>
    cells
      .map((v, i) => (i !== last && v.length > shown[i]! ? `${v.slice(0, shown[i]! - 1)}…` : v.padEnd(i === last ? 0 : shown[i]!)))
      .join('  ')
      .trimEnd();
  return [line(cols), shown.map((w) => '-'.repeat(w)).join('  '), ...data.map(line)].join('\n');
}

/** key: value lines for one record. */
export function keyValues(obj: Record<string, unknown>): string {
  const width = Math.max(...Object.keys(obj).map((k) => k.length));
  return Object.entries(obj)
    .map(([k, v]) => `${k.padEnd(width)}  ${v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join('\n');
}
