/**
 * Hash navigation. main.ts registers the router; pages call go() and rerender() through here, so
 * no page imports main.ts (no import cycle).
 */

export const REFRESH_MS = 5000;

let render: () => Promise<void> = async () => {};
let refreshTimer: ReturnType<typeof setTimeout> | undefined;

/** Renders the page the hash names, now and on every hash change. */
export function startRouter(fn: () => Promise<void>): void {
  render = fn;
  window.addEventListener('hashchange', () => void rerender());
  void rerender();
}

/** Renders the current page again (a pending auto-refresh is dropped: the render schedules its own). */
export function rerender(): Promise<void> {
  clearTimeout(refreshTimer);
  return render();
}

export function go(hash: string): void {
  if (location.hash === hash) void rerender();
  else location.hash = hash;
}

/** The overview refreshes itself. */
export function scheduleRefresh(): void {
  refreshTimer = setTimeout(() => void rerender(), REFRESH_MS);
}
