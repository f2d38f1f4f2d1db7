/** Exponential backoff: initial, doubling per attempt, capped. `attempt` counts from 1. */
export function backoffMs(attempt: number, initialMs: number, maxMs: number): number {
  const exp = Math.min(attempt - 1, 30); // 2^30 already exceeds any sane cap
  return Math.min(initialMs * 2 ** Math.max(exp, 0), maxMs);
}
