import { describe, expect, it } from 'vitest';
import { advance, type Frontier, type Gap, type SeenRow } from '../../lib/pipeline/gaps.ts';
import { FakeClock } from '../../lib/shared/clock.ts';

/** The frontier's gap/hole state machine, driven by a fake clock (docs/ordering.md). */
describe('mailbox frontier: gaps and holes', () => {
  const row = (id: number, processed = false): SeenRow => ({ id, receivedAt: null, processed });
  const rows = (...ids: number[]) => ids.map((id) => row(id));

  /** A poller over an in-memory mailbox: each step reads what has "committed" so far. */
  function poller(graceMs: number) {
    const clock = new FakeClock('2026-11-30T00:00:00Z');
    const committed = new Map<number, SeenRow>();
    let frontier: Frontier = { accounted: 0, scanned: 0 };
    let gaps: Gap[] = [];
    const enqueued: number[] = [];
    const late: number[] = [];
    let holes = 0;
    return {
      clock,
      commit: (...r: SeenRow[]) => r.forEach((x) => committed.set(x.id, x)),
      poll() {
        const sorted = [...committed.values()].sort((a, b) => a.id - b.id);
        const r = advance({
          frontier,
          gaps,
          inGaps: sorted.filter((x) => gaps.some((g) => x.id >= g.lo && x.id <= g.hi)),
          fresh: sorted.filter((x) => x.id > frontier.scanned),
          now: clock.now(),
          graceMs,
        });
        frontier = r.frontier;
        gaps = r.gaps;
        enqueued.push(...r.enqueue.map((x) => x.id));
        late.push(...r.late);
        holes += r.newHoles.reduce((n, g) => n + g.hi - g.lo + 1, 0);
        return r;
      },
      get frontier() {
        return frontier;
      },
      get gaps() {
        return gaps;
      },
      enqueued,
      late,
      get holes() {
        return holes;
      },
    };
  }

  it('moves over contiguous rows and skips rows another system already processed, without a gap', () => {
    const p = poller(3000);
    p.commit(...rows(1, 2), row(3, true), ...rows(4));
    p.poll();
    expect(p.frontier).toEqual({ accounted: 4, scanned: 4 });
    expect(p.enqueued).toEqual([1, 2, 4]);
    expect(p.gaps).toEqual([]);
  });

  it('holds the frontier below a gap until the row commits within the grace', () => {
    const p = poller(3000);
    p.commit(...rows(1, 2, 4, 5));
    p.poll();
    expect(p.frontier).toEqual({ accounted: 2, scanned: 5 });
    expect(p.gaps).toMatchObject([{ lo: 3, hi: 3, holeAt: null }]);
    p.clock.advance(2999);
    p.poll();
    expect(p.frontier.accounted).toBe(2);
    p.commit(row(3));
    p.poll();
    expect(p.frontier).toEqual({ accounted: 5, scanned: 5 });
    expect(p.gaps).toEqual([]);
    expect(p.enqueued).toEqual([1, 2, 4, 5, 3]);
    expect(p.late).toEqual([]);
    expect(p.holes).toBe(0);
  });

  it('declares a gap a hole once the grace has passed, counted once, and a row that fills it later is late', () => {
    const p = poller(3000);
    p.commit(...rows(1, 5));
    p.poll();
    expect(p.gaps).toMatchObject([{ lo: 2, hi: 4, holeAt: null }]);
    p.clock.advance(3000);
    const r = p.poll();
    expect(r.newHoles).toMatchObject([{ lo: 2, hi: 4 }]);
    expect(p.frontier.accounted).toBe(5);
    p.clock.advance(1000);
    expect(p.poll().newHoles).toEqual([]);
    expect(p.holes).toBe(3);
    // ID 3 commits long after: enqueued, late; the rest of the hole stays a hole (split around it).
    p.commit(row(3));
    p.poll();
    expect(p.late).toEqual([3]);
    expect(p.gaps).toMatchObject([
      { lo: 2, hi: 2 },
      { lo: 4, hi: 4 },
    ]);
    expect(p.gaps.every((g) => g.holeAt !== null)).toBe(true);
    expect(p.holes).toBe(3);
  });

  it('with a grace of 0 never waits: a gap is a hole at once', () => {
    const p = poller(0);
    p.commit(...rows(1, 3));
    const r = p.poll();
    expect(r.newHoles).toMatchObject([{ lo: 2, hi: 2 }]);
    expect(p.frontier).toEqual({ accounted: 3, scanned: 3 });
  });

  it('waits for the first of several gaps; a later gap expiring first does not let the frontier pass the earlier one', () => {
    const p = poller(3000);
    p.commit(...rows(1, 3));
    p.poll(); // gap 2 seen at t0
    p.clock.advance(2000);
    p.commit(...rows(5));
    p.poll(); // gap 4 seen at t0+2s
    expect(p.frontier.accounted).toBe(1);
    p.clock.advance(1000); // gap 2 expires, gap 4 still waited for
    p.poll();
    expect(p.frontier.accounted).toBe(3);
    p.clock.advance(2000);
    p.poll();
    expect(p.frontier.accounted).toBe(5);
    expect(p.holes).toBe(2);
  });

  it('starts the sequence at the first row of a mailbox seen for the first time', () => {
    const p = poller(3000);
    p.commit(...rows(1000, 1001));
    p.poll();
    expect(p.frontier).toEqual({ accounted: 1001, scanned: 1001 });
    expect(p.gaps).toEqual([]);
  });

  it('a row found processed inside a gap closes it without being enqueued', () => {
    const p = poller(3000);
    p.commit(...rows(1, 3));
    p.poll();
    p.commit(row(2, true));
    p.poll();
    expect(p.frontier.accounted).toBe(3);
    expect(p.enqueued).toEqual([1, 3]);
  });
});
