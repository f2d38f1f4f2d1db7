import type { Queryable } from '../db/db.ts';

/** Transactional messages per state, for /admin/stats and the console. */
export async function txCountsByStatus(q: Queryable): Promise<Record<string, number>> {
  const r = await q.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM tx_message GROUP BY status ORDER BY status`);
  return Object.fromEntries(r.rows.map((row) => [row.status, row.n]));
}
