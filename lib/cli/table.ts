/** Plain text tables for people: aligned columns, a header rule, nothing fancy. */
export function table(rows: Record<string, unknown>[], columns?: string[], opts: { width?: number; keepWhole?: string[] } = {}): string {
  if (rows.length === 0) return '(none)';
  const cols = columns ?? Object.keys(rows[0]!);
  const data = rows.map((r) => cols.map((c) => cell(r[c])));
  // Columns are capped at 60 characters to stay readable, except the last: a reason there is read
  // whole, unless a width is asked for (then it is cut to fit, marked with an ellipsis).
  const last = cols.length - 1;
  const widths = cols.map((c, i) => Math.max(c.length, ...data.map((d) => d[i]!.length)));
  const shown = widths.map((w, i) => (i === last ? w : Math.min(60, w)));
  if (opts.width !== undefined) {
    // Too wide even before the last column has room for a few words: narrow the widest other
    // column (never below its header or 12 characters, never one named in keepWhole) until it fits.
    const room = Math.min(shown[last]!, Math.max(cols[last]!.length, 24));
    const before = () => shown.slice(0, last).reduce((n, w) => n + w + 2, 0);
    while (before() + room > opts.width) {
      let widest = -1;
      for (let i = 0; i < last; i++)
        if (!opts.keepWhole?.includes(cols[i]!) && shown[i]! > Math.max(12, cols[i]!.length) && (widest < 0 || shown[i]! > shown[widest]!))
          widest = i;
      if (widest < 0) break;
      shown[widest]!--;
    }
    shown[last] = Math.max(cols[last]!.length, Math.min(shown[last]!, opts.width - before()));
  }
  const cutLast = opts.width !== undefined;
  const line = (cells: string[]) =>
    cells
      .map((v, i) => {
        if ((i !== last || cutLast) && v.length > shown[i]!) return ellipsis(v, shown[i]!);
        return v.padEnd(i === last ? 0 : shown[i]!);
      })
      .join('  ')
      .trimEnd();
  return [line(cols), shown.map((w) => '-'.repeat(w)).join('  '), ...data.map(line)].join('\n');
}

function cell(v: unknown): string {
  const s =
    v === null || v === undefined ? '' : v instanceof Date ? v.toISOString() : typeof v === 'object' ? JSON.stringify(v) : String(v);
  // One row is one line: a reason with line breaks would break the columns. A run of white space
  // holding a line break becomes one space; `\s+` never backtracks (`\s*\n\s*` did, quadratically
  // over a long run of spaces in a stored reason).
  return s.replace(/\s+/g, (run) => (run.includes('\n') ? ' ' : run));
}

/** `text` cut to at most `max` characters, the cut marked with `…`. */
export function ellipsis(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

/** key: value lines for one record (null and undefined values are left out when `skipEmpty`). */
export function keyValues(obj: Record<string, unknown>, opts: { skipEmpty?: boolean } = {}): string {
  const entries = Object.entries(obj).filter(([, v]) => !opts.skipEmpty || (v !== null && v !== undefined && v !== ''));
  const width = Math.max(...entries.map(([k]) => k.length));
  return entries
    .map(([k, v]) => `${k.padEnd(width)}  ${v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join('\n');
}

/** An ISO time as people read it in a table: `2026-11-29 09:30:00` (UTC). */
export function when(iso: string | null | undefined): string {
  return iso ? iso.replace('T', ' ').replace(/(\.\d+)?Z$/, '') : '';
}
