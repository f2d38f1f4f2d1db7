import { z } from 'zod';
import { type AuditEntry, auditNaming, writeAudit } from '../audit/audit.ts';
import type { Db, Queryable } from '../db/db.ts';
import { fieldError } from '../http/bodySchema.ts';
import { lazy } from '../shared/lazy.ts';
import { REPLAYABLE_CLASSES } from './states.ts';

/** The most IDs one replay call may name (proc and event alike). */
export const MAX_REPLAY_IDS = 10_000;

/** Built on the first replay request, not at cold start. */
const replayRequestSchema = lazy(() =>
  z
    .object({
      errorClass: z.enum(REPLAYABLE_CLASSES).optional(),
      // Numbers only: coercing would read "0x10" as message 16.
      ids: z.array(z.number().int().positive()).max(MAX_REPLAY_IDS, `at most ${MAX_REPLAY_IDS} ids per call`).optional(),
      dryRun: z.boolean().default(false),
    })
    .strict()
    .refine((r) => r.errorClass !== undefined || (r.ids && r.ids.length > 0), {
      message: 'name an errorClass or a non-empty list of ids',
    }),
);
export type ReplayRequest = z.infer<ReturnType<typeof replayRequestSchema>>;

/** The audit actions of a replay and of its dry run. */
const REPLAY_ACTIONS = ['replay.proc', 'replay.proc.dry-run'] as const;

export interface ReplayResult {
  dryRun: boolean;
  moved: { msgId: number; status: string; errorClass: string }[];
  /** IDs asked for that cannot be replayed, with the reason. */
  refused: { msgId: number; reason: string }[];
  /** Re-queueing an old message does not restore the original order (README "Operations", docs/console.md "Pages"). */
  warnings: string[];
}

/**
 * Moves FAILED/DEAD messages of a replayable class back to PENDING (attempts and deadline reset,
 * identity and attempt history kept), by class or by IDs, with a dry run. One audit row per call.
 */
export async function replayMessages(db: Db, req: ReplayRequest, actor: string, now: Date): Promise<ReplayResult> {
  return db.tx(async (tx) => {
    const candidates = await tx.query<{ msg_id: number; status: string; error_class: string | null }>(
      `SELECT msg_id, status, error_class FROM proc_state
       WHERE ($1::text IS NULL OR error_class = $1) AND ($2::bigint[] IS NULL OR msg_id = ANY($2::bigint[]))
         AND (status IN ('FAILED', 'DEAD') OR $2::bigint[] IS NOT NULL)
       ORDER BY msg_id FOR UPDATE`,
      [req.errorClass ?? null, req.ids ?? null],
    );
    const refused: ReplayResult['refused'] = [];
    const moved: ReplayResult['moved'] = [];
    for (const c of candidates.rows) {
      if (c.status !== 'FAILED' && c.status !== 'DEAD') refused.push({ msgId: c.msg_id, reason: `status is ${c.status}` });
      else if (!REPLAYABLE_CLASSES.includes(c.error_class as never))
        refused.push({ msgId: c.msg_id, reason: `${c.error_class} is not replayable (fix the message instead)` });
      else moved.push({ msgId: c.msg_id, status: c.status, errorClass: c.error_class! });
    }
    const known = new Set(candidates.rows.map((c) => c.msg_id));
    for (const id of req.ids ?? []) if (!known.has(id)) refused.push({ msgId: id, reason: 'no such message' });

    const warnings: string[] = [];
    if (moved.length > 0) {
      const oldest = moved[0]!.msgId;
      const newer = await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM proc_state WHERE msg_id > $1 AND status = 'SUCCEEDED'`, [
        oldest,
      ]);
      if (newer.rows[0]!.n > 0)
        warnings.push(
          `${newer.rows[0]!.n} newer message(s) already succeeded after #${oldest}: replaying may overwrite newer flight state (re-queueing does not restore the original order)`,
        );
    }
    if (!req.dryRun && moved.length > 0) {
      const ids = moved.map((m) => m.msgId);
      await tx.query(
        `UPDATE proc_state SET status = 'PENDING', attempts = 0, next_attempt_at = $2, first_attempt_at = NULL,
           error_class = NULL, error_detail = NULL, finished_at = NULL, updated_at = $2
         WHERE msg_id = ANY($1::bigint[])`,
        [ids, now],
      );
      await tx.query(`DELETE FROM backfill_todo WHERE msg_id = ANY($1::bigint[])`, [ids]);
      await tx.query(`SELECT pg_notify('msgx_inbox', '')`);
    }
    await writeAudit(tx, {
      at: now,
      actor,
      action: req.dryRun ? REPLAY_ACTIONS[1] : REPLAY_ACTIONS[0],
      detail: { request: req, moved: moved.map((m) => m.msgId), refused },
    });
    return { dryRun: req.dryRun, moved, refused, warnings };
  });
}

export function parseReplayRequest(body: unknown): ReplayRequest {
  const r = replayRequestSchema().safeParse(body);
  if (!r.success) throw fieldError(r.error);
  return r.data;
}

/** The replays (and dry runs) that named a message, from the audit log (for its trace). */
export async function replaysOf(q: Queryable, msgId: number): Promise<AuditEntry[]> {
  return auditNaming(q, REPLAY_ACTIONS, 'moved', msgId);
}
