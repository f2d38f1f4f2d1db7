import type { Queryable } from '../db/db.ts';

/** Transactional messages per state, for /admin/stats and the console. */
export async function txCountsByStatus(q: Queryable): Promise<Record<string, number>> {
  const r = await q.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM tx_message GROUP BY status ORDER BY status`,
  );
  return Object.fromEntries(r.rows.map((row) => [row.status, row.n]));
}

/** Transactional messages that went DEAD after `since` (a gauge). */
export async function txDeadSince(q: Queryable, since: Date): Promise<number> {
  const r = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM tx_message WHERE status = 'DEAD' AND updated_at > $1`, [since]);
  return r.rows[0]!.n;
}
