/**
 * A running role starts its successor this long before its budget ends: the successor's cold
 * start and lock wait overlap the end of the run, so the role is present every second of the
 * minute, not only between a schedule's tick and its budget.
 */
export const HANDOVER_LEAD_MS = 5_000;

/** The event a run sends its successor: it waits for the lock instead of exiting at once. */
export const HANDOVER_EVENT = { msgxHandover: true } as const;

export function isHandover(event: unknown): boolean {
  return typeof event === 'object' && event !== null && (event as { msgxHandover?: unknown }).msgxHandover === true;
}
