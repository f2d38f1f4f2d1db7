import type { Queryable } from '../db/db.ts';
import type { Frontier, Gap } from './gaps.ts';

/** All SQL on mailbox_gap, mailbox_late and the frontier's msgx_state rows lives here. */

const FRONTIER = 'mailbox.frontier';
const COUNTERS = 'mailbox.counters';
const RESCAN = 'mailbox.rescan';

/** The frontier, the open gaps and the holes declared after `recheckSince` (one round trip). */
export async function loadFrontier(q: Queryable, recheckSince: Date): Promise<{ frontier: Frontier; gaps: Gap[] }> {
  const r = await q.query<{
    accounted: string | null;
    scanned: string | null;
    gaps: { lo: number; hi: number; first_seen: string; hole_at: string | null }[] | null;
  }>(
    `SELECT (SELECT value->>'accounted' FROM msgx_state WHERE key = $1) AS accounted,
            (SELECT value->>'scanned' FROM msgx_state WHERE key = $1) AS scanned,
            (SELECT json_agg(g ORDER BY g.lo) FROM (SELECT lo, hi, first_seen, hole_at FROM mailbox_gap
               WHERE hole_at IS NULL OR hole_at > $2) g) AS gaps`,
    [FRONTIER, recheckSince],
  );
  const row = r.rows[0]!;
  return {
    frontier: { accounted: Number(row.accounted ?? 0), scanned: Number(row.scanned ?? 0) },
    gaps: (row.gaps ?? []).map((g) => ({
      lo: Number(g.lo),
      hi: Number(g.hi),
      firstSeen: new Date(g.first_seen),
      holeAt: g.hole_at ? new Date(g.hole_at) : null,
    })),
  };
}

/**
 * Replaces the gaps the poller loaded with what is left of them, writes the frontier and adds the
 * new holes and late rows to the counters, in the caller's transaction (with the enqueue).
 */
export async function saveFrontier(
  q: Queryable,
  o: { loaded: Gap[]; gaps: Gap[]; frontier: Frontier; newHoleIds: number; late: number[]; now: Date },
): Promise<void> {
  const { loaded, gaps, frontier, now } = o;
  const changed = loaded.length !== gaps.length || loaded.some((g, i) => !sameGap(g, gaps[i]!));
  if (changed) {
    if (loaded.length) await q.query(`DELETE FROM mailbox_gap WHERE lo = ANY($1::bigint[])`, [loaded.map((g) => g.lo)]);
    if (gaps.length)
      await q.query(
        `INSERT INTO mailbox_gap (lo, hi, first_seen, hole_at)
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::timestamptz[])`,
        [gaps.map((g) => g.lo), gaps.map((g) => g.hi), gaps.map((g) => g.firstSeen), gaps.map((g) => g.holeAt)],
      );
  }
  await q.query(
    `INSERT INTO msgx_state (key, value, updated_at) VALUES ($1, $2, $3)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at
     WHERE msgx_state.value IS DISTINCT FROM EXCLUDED.value`,
    [FRONTIER, JSON.stringify(frontier), now],
  );
  if (o.newHoleIds > 0) await bumpCounter(q, 'holes', o.newHoleIds, now);
  if (o.late.length) await markLate(q, o.late, 'poller', now);
}

const sameGap = (a: Gap, b: Gap) =>
  a.lo === b.lo && a.hi === b.hi && a.firstSeen.getTime() === b.firstSeen.getTime() && a.holeAt?.getTime() === b.holeAt?.getTime();

async function bumpCounter(q: Queryable, name: 'holes', n: number, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO msgx_state (key, value, updated_at) VALUES ($1, jsonb_build_object($2::text, $3::bigint), $4)
     ON CONFLICT (key) DO UPDATE SET updated_at = EXCLUDED.updated_at,
       value = msgx_state.value || jsonb_build_object($2::text, COALESCE((msgx_state.value->>$2)::bigint, 0) + $3::bigint)`,
    [COUNTERS, name, n, now],
  );
}

/** Records rows enqueued after their ID was given up as a hole (shown in their trace, counted). */
export async function markLate(q: Queryable, ids: number[], via: 'poller' | 'rescan', now: Date): Promise<void> {
  if (ids.length === 0) return;
  await q.query(
    `INSERT INTO mailbox_late (msg_id, found_at, via) SELECT id, $2, $3 FROM unnest($1::bigint[]) AS id ON CONFLICT DO NOTHING`,
    [ids, now, via],
  );
}

export async function lateOf(q: Queryable, msgId: number): Promise<{ foundAt: Date; via: string } | null> {
  const r = await q.query<{ found_at: Date; via: string }>(`SELECT found_at, via FROM mailbox_late WHERE msg_id = $1`, [msgId]);
  const row = r.rows[0];
  return row ? { foundAt: row.found_at, via: row.via } : null;
}

export interface OrderingStats {
  accounted: number;
  scanned: number;
  /** Gaps still waited for, and how many IDs they span. */
  gapsWaiting: number;
  /** IDs ever declared holes, and those of them never filled (rolled back, or still to come). */
  holesDeclared: number;
  holesOpen: number;
  lateRows: number;
  oldestGapSeconds: number;
}

export async function orderingStats(q: Queryable, now: Date): Promise<OrderingStats> {
  const r = await q.query<{
    f: { accounted?: number; scanned?: number } | null;
    holes: string | null;
    waiting: number;
    open: string;
    late: number;
    oldest: Date | null;
  }>(
    `SELECT (SELECT value FROM msgx_state WHERE key = $1) AS f,
            (SELECT value->>'holes' FROM msgx_state WHERE key = $2) AS holes,
            (SELECT count(*)::int FROM mailbox_gap WHERE hole_at IS NULL) AS waiting,
            -- A hole the poller no longer re-checks keeps its range when the sweep's re-scan finds a
            -- row in it (only the poller rewrites ranges, so the two never race): such late rows
            -- filled their ID all the same.
            ((SELECT COALESCE(sum(hi - lo + 1), 0) FROM mailbox_gap WHERE hole_at IS NOT NULL)
              - (SELECT count(*) FROM mailbox_late l
                 WHERE EXISTS (SELECT 1 FROM mailbox_gap g WHERE g.hole_at IS NOT NULL AND l.msg_id BETWEEN g.lo AND g.hi)))::text AS open,
            (SELECT count(*)::int FROM mailbox_late) AS late,
            (SELECT min(first_seen) FROM mailbox_gap WHERE hole_at IS NULL) AS oldest`,
    [FRONTIER, COUNTERS],
  );
  const row = r.rows[0]!;
  return {
    accounted: Number(row.f?.accounted ?? 0),
    scanned: Number(row.f?.scanned ?? 0),
    gapsWaiting: row.waiting,
    holesDeclared: Number(row.holes ?? 0),
    holesOpen: Number(row.open),
    lateRows: row.late,
    oldestGapSeconds: row.oldest ? Math.max(0, (now.getTime() - new Date(row.oldest).getTime()) / 1000) : 0,
  };
}

/** Mailbox IDs ever given up as holes, and rows processed late (gauges; docs/ordering.md). */
export async function holeCounters(q: Queryable): Promise<{ holes: number; lateRows: number }> {
  const r = await q.query<{ holes: string | null; late: number }>(
    `SELECT (SELECT value->>'holes' FROM msgx_state WHERE key = $1) AS holes,
            (SELECT count(*) FROM mailbox_late)::int AS late`,
    [COUNTERS],
  );
  const row = r.rows[0]!;
  return { holes: Number(row.holes ?? 0), lateRows: row.late };
}

/** The re-scan's resumable cursor. */
export async function readRescanCursor(q: Queryable): Promise<number> {
  const r = await q.query<{ id: string | null }>(`SELECT value->>'id' AS id FROM msgx_state WHERE key = $1`, [RESCAN]);
  return Number(r.rows[0]?.id ?? 0);
}

export async function writeRescanCursor(q: Queryable, id: number, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO msgx_state (key, value, updated_at) VALUES ($1, $2, $3)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
    [RESCAN, JSON.stringify({ id }), now],
  );
}

/** Of these IDs, the ones msgx has never enqueued (neither live nor archived). */
export async function unknownIds(q: Queryable, ids: number[]): Promise<number[]> {
  if (ids.length === 0) return [];
  const r = await q.query<{ id: number }>(
    `SELECT id FROM unnest($1::bigint[]) AS id
     WHERE NOT EXISTS (SELECT 1 FROM proc_state p WHERE p.msg_id = id)
       AND NOT EXISTS (SELECT 1 FROM proc_state_hst h WHERE h.msg_id = id) ORDER BY id`,
    [ids],
  );
  return r.rows.map((x) => Number(x.id));
}

export const FRONTIER_KEY = FRONTIER;
