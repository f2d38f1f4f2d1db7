import type { Db } from '../db/db.ts';
import { TERMINAL_STATUSES } from './states.ts';

/**
 * Moves terminal proc_state rows finished before the retention cutoff to proc_state_hst, in
 * batches, each batch one statement (delete + insert together: a crash loses or doubles nothing).
 * PENDING and FAILED rows are never moved. identity_key moves with the row, and the identity
 * check reads both tables, so an archived message still makes its duplicates SKIPPED.
 */
export async function archiveProcState(
  db: Db,
  opts: { now: Date; retentionDays: number; batch?: number; maxBatches?: number },
): Promise<number> {
  const cutoff = new Date(opts.now.getTime() - opts.retentionDays * 86_400_000);
  const batch = opts.batch ?? 1000;
  let total = 0;
  for (let i = 0; i < (opts.maxBatches ?? 100); i++) {
    const r = await db.query<{ n: number }>(
      `WITH moved AS (
         DELETE FROM proc_state WHERE msg_id IN (
           SELECT p.msg_id FROM proc_state p
           WHERE p.status = ANY($4::text[]) AND p.finished_at IS NOT NULL AND p.finished_at < $1
             -- never delete a row the insert below could not keep
             AND NOT EXISTS (SELECT 1 FROM proc_state_hst h WHERE h.msg_id = p.msg_id OR h.identity_key = p.identity_key)
           ORDER BY p.msg_id LIMIT $2 FOR UPDATE SKIP LOCKED)
         AND status = ANY($4::text[])
         RETURNING *),
       ins AS (
         INSERT INTO proc_state_hst (msg_id, status, identity_key, msg_type, msg_subtype, attempts, next_attempt_at,
           first_attempt_at, error_class, error_detail, note, raw_text, received_at, enqueued_at, updated_at, finished_at, archived_at)
         SELECT msg_id, status, identity_key, msg_type, msg_subtype, attempts, next_attempt_at, first_attempt_at,
           error_class, error_detail, note, raw_text, received_at, enqueued_at, updated_at, finished_at, $3
         FROM moved RETURNING 1)
       SELECT count(*)::int AS n FROM moved`,
      [cutoff, batch, opts.now, TERMINAL_STATUSES],
    );
    const n = r.rows[0]?.n ?? 0;
    total += n;
    if (n < batch) break;
  }
  return total;
}
