import { writeAudit } from '../audit/audit.ts';
import type { Queryable } from '../db/db.ts';

/**
 * The pause flag in PostgreSQL: the single truth of "paused", in the twin and in the cloud alike.
 * Paused means no head processing: the pump applies nothing and the ingress does not kick it.
 * Everything else goes on — the ingress accepts, the poller enqueues, the dispatcher delivers,
 * the sweep runs check-backs, back-fills and retention — so work accepted before the pause is
 * not held up. The schedules are never disabled: a second switch could disagree with the flag
 * (docs/deploy.md "Pause").
 */
const KEY = 'pipeline.paused';

export async function isPaused(q: Queryable): Promise<boolean> {
  const r = await q.query<{ value: { paused?: boolean } }>(`SELECT value FROM msgx_state WHERE key = $1`, [KEY]);
  return r.rows[0]?.value.paused === true;
}

/**
 * Sets the flag and audits who did it. The one path every way of pausing takes (the admin route,
 * and through it the CLI and the console). `changed` is false when it already was so.
 */
export async function setPaused(q: Queryable, paused: boolean, actor: string, now: Date): Promise<{ paused: boolean; changed: boolean }> {
  // The previous value is read in the same statement that writes the new one.
  const r = await q.query<{ was: boolean | null }>(
    `WITH prev AS (SELECT (value->>'paused')::boolean AS was FROM msgx_state WHERE key = $1)
     INSERT INTO msgx_state (key, value, updated_at) VALUES ($1, $2, $3)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at
     RETURNING (SELECT was FROM prev) AS was`,
    [KEY, JSON.stringify({ paused, by: actor, at: now.toISOString() }), now],
  );
  await writeAudit(q, { at: now, actor, action: paused ? 'pipeline.pause' : 'pipeline.resume' });
  return { paused, changed: (r.rows[0]?.was === true) !== paused };
}

/**
 * "No auto-start" (MSGX_START_PAUSED): a start — the twin's, a deploy's migration —
 * pauses head processing before any role runs, audited under `actor`, until an operator resumes.
 * Returns whether it paused.
 */
export async function pauseAtStart(q: Queryable, startPaused: boolean, actor: string, now: Date): Promise<boolean> {
  if (!startPaused) return false;
  await setPaused(q, true, actor, now);
  return true;
}
