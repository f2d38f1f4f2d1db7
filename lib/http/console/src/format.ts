/** Times, durations and counts as the console shows them. */

export function fmtTime(iso: string | null | undefined, withDate?: boolean): string {
  if (!iso) return '—';
  const d = new Date(iso);
  const today = new Date().toDateString() === d.toDateString();
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  return today && !withDate ? time : `${d.toLocaleDateString([], { year: 'numeric', month: '2-digit', day: '2-digit' })} ${time}`;
}

export function fmtDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const sec = ms / 1000;
  if (sec < 60) return `${sec < 10 ? sec.toFixed(1) : Math.round(sec)} s`;
  const min = sec / 60;
  if (min < 60) return `${Math.floor(min)} m ${Math.round(sec % 60)} s`;
  const hr = min / 60;
  if (hr < 48) return `${Math.floor(hr)} h ${Math.round(min % 60)} m`;
  return `${Math.round(hr / 24)} d`;
}

export const n = (v: number | null | undefined): string => (v ?? 0).toLocaleString();
export const plural = (count: number, word: string): string => `${n(count)} ${word}${count === 1 ? '' : 's'}`;

/** An axis label: 1.5k above a thousand, one decimal below. */
export const fmtCount = (v: number): string => (v >= 1000 ? `${(v / 1000).toFixed(v % 1000 ? 1 : 0)}k` : String(Math.round(v * 10) / 10));

/** A round axis maximum that splits into four round steps (counts stay whole numbers). */
export function niceMax(v: number): number {
  if (v <= 4) return 4;
  const step = v / 4;
  const p = 10 ** Math.floor(Math.log10(step));
  for (const m of [1, 2, 5, 10]) if (m * p >= step) return 4 * m * p;
  return 40 * p;
}
