/**
 * The mailbox frontier as a pure state machine (docs/ordering.md), so it can be tested with a fake
 * clock. The poller feeds it what it read; it answers what to enqueue, which gaps remain and how
 * far the pump may go.
 *
 * - `scanned`: the highest mailbox ID read so far; every ID at or below it is a row seen, or in a gap.
 * - `accounted`: the highest ID A such that every ID ≤ A is a row seen (enqueued, or processed by
 *   another system) or a hole. The pump runs no message above A.
 * - A gap is a range of IDs skipped in the sequence (an insert not committed yet, or rolled back).
 *   It is waited for `graceMs` from when it was first seen, then becomes a hole: A moves past it.
 *   A hole is still re-checked by ID for a while; a row found in it is enqueued and marked late.
 */

export interface Frontier {
  accounted: number;
  scanned: number;
}

export interface Gap {
  lo: number;
  hi: number;
  firstSeen: Date;
  holeAt: Date | null;
}

export interface SeenRow {
  id: number;
  receivedAt: Date | null;
  /** DATE_PROCESSED already set (by another system, or by msgx earlier): not enqueued, not a gap. */
  processed: boolean;
}

export interface AdvanceInput {
  frontier: Frontier;
  /** Every open gap, and the holes still re-checked. */
  gaps: Gap[];
  /** Rows read inside those gaps' ranges. */
  inGaps: SeenRow[];
  /** Rows read above `frontier.scanned`, in ID order. */
  fresh: SeenRow[];
  now: Date;
  graceMs: number;
}

export interface AdvanceResult {
  frontier: Frontier;
  /** The new set replacing `input.gaps` (ranges split where rows were found, new gaps added). */
  gaps: Gap[];
  /** Unprocessed rows to enqueue, in ID order. */
  enqueue: SeenRow[];
  /** IDs of `enqueue` found inside a hole: late rows. */
  late: number[];
  /** Gaps declared holes by this step. */
  newHoles: Gap[];
}

export function advance(input: AdvanceInput): AdvanceResult {
  const { now, graceMs } = input;
  const enqueue: SeenRow[] = [];
  const late: number[] = [];
  const gaps: Gap[] = [];

  // 1. Rows that filled (part of) a known gap: the rest of the range stays a gap.
  const found = [...input.inGaps].sort((a, b) => a.id - b.id);
  for (const g of input.gaps) {
    const inside = found.filter((r) => r.id >= g.lo && r.id <= g.hi);
    let lo = g.lo;
    for (const r of inside) {
      if (r.id > lo) gaps.push({ ...g, lo, hi: r.id - 1 });
      lo = r.id + 1;
      if (!r.processed) {
        enqueue.push(r);
        if (g.holeAt) late.push(r.id);
      }
    }
    if (lo <= g.hi) gaps.push({ ...g, lo });
  }

  // 2. Rows above the scanned mark; every ID skipped between them is a new gap. On the very first
  //    scan the mailbox's first row starts the sequence (older IDs are not this system's to wait for).
  let scanned = input.frontier.scanned;
  let accountedFloor = input.frontier.accounted;
  if (scanned === 0 && input.fresh.length > 0 && input.gaps.length === 0) {
    scanned = input.fresh[0]!.id - 1;
    accountedFloor = Math.max(accountedFloor, scanned);
  }
  for (const r of input.fresh) {
    if (r.id <= scanned) continue;
    if (r.id > scanned + 1) gaps.push({ lo: scanned + 1, hi: r.id - 1, firstSeen: now, holeAt: null });
    if (!r.processed) enqueue.push(r);
    scanned = r.id;
  }

  // 3. A gap waited for long enough becomes a hole (graceMs 0: at once).
  const newHoles: Gap[] = [];
  for (const g of gaps) {
    if (g.holeAt === null && now.getTime() - g.firstSeen.getTime() >= graceMs) {
      g.holeAt = now;
      newHoles.push(g);
    }
  }

  // 4. The pump may go up to just below the first gap still waited for.
  const waiting = gaps.filter((g) => g.holeAt === null).map((g) => g.lo);
  const accounted = Math.max(accountedFloor, waiting.length ? Math.min(...waiting) - 1 : scanned);

  gaps.sort((a, b) => a.lo - b.lo);
  enqueue.sort((a, b) => a.id - b.id);
  return { frontier: { accounted, scanned }, gaps, enqueue, late, newHoles };
}

/** Number of IDs in a set of ranges. */
export const idsIn = (gaps: Gap[]): number => gaps.reduce((n, g) => n + (g.hi - g.lo + 1), 0);
