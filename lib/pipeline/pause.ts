import { writeAudit } from '../audit/audit.ts';
import type { Queryable } from '../db/db.ts';

/**
 * The pause flag every worker and the ingress's kick respect. Paused means no head processing;
 * the ingress keeps accepting and the poller keeps enqueueing.
 */
const KEY = 'pipeline.paused';

export async function isPaused(q: Queryable): Promise<boolean> {
  const r = await q.query<{ value: { paused?: boolean } }>(`SELECT value FROM msgx_state WHERE key = $1`, [KEY]);
  return r.rows[0]?.value.paused === true;
}

export async function setPaused(q: Queryable, paused: boolean, actor: string, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO msgx_state (key, value, updated_at) VALUES ($1, $2, $3)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
    [KEY, JSON.stringify({ paused, by: actor, at: now.toISOString() }), now],
  );
  await writeAudit(q, { at: now, actor, action: paused ? 'pipeline.pause' : 'pipeline.resume' });
}
