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
export const REPLAY_ACTION = 'replay.proc';
const REPLAY_ACTIONS = [REPLAY_ACTION, 'replay.proc.dry-run'] as const;

export interface ReplayResult {
  dryRun: boolean;
  /** `archived`: the message had moved to proc_state_hst and is back in proc_state. */
  moved: { msgId: number; status: string; errorClass: string; archived?: true }[];
  /** IDs asked for that cannot be replayed, with the reason. */
  refused: { msgId: number; reason: string }[];
  /** Re-queueing an old message does not restore the original order (README "Operations", docs/console.md "Pages"). */
  warnings: string[];
}

/**
 * Moves FAILED/DEAD messages of a replayable class back to PENDING (attempts and deadline reset,
 * identity and attempt history kept), by class or by IDs, with a dry run. One audit row per call.
 * A DEAD message already archived to proc_state_hst is replayed too: it moves back into
 * proc_state as PENDING (a DEAD row holds no identity, so nothing it held is taken twice).
 */
export async function replayMessages(db: Db, req: ReplayRequest, actor: string, now: Date): Promise<ReplayResult> {
  return db.tx(async (tx) => {
    const filter = [req.errorClass ?? null, req.ids ?? null];
    const live = await tx.query<Candidate>(
      `SELECT msg_id, status, error_class, false AS archived FROM proc_state
       WHERE ($1::text IS NULL OR error_class = $1) AND ($2::bigint[] IS NULL OR msg_id = ANY($2::bigint[]))
         AND (status IN ('FAILED', 'DEAD') OR $2::bigint[] IS NOT NULL)
       ORDER BY msg_id FOR UPDATE`,
      filter,
    );
    const archived = await tx.query<Candidate>(
      `SELECT msg_id, status, error_class, true AS archived FROM proc_state_hst
       WHERE ($1::text IS NULL OR error_class = $1) AND ($2::bigint[] IS NULL OR msg_id = ANY($2::bigint[]))
         AND (status = 'DEAD' OR $2::bigint[] IS NOT NULL)
       ORDER BY msg_id FOR UPDATE`,
      filter,
    );
    const candidates = [...live.rows, ...archived.rows].sort((a, b) => a.msg_id - b.msg_id);
    const refused: ReplayResult['refused'] = [];
    const moved: ReplayResult['moved'] = [];
    for (const c of candidates) {
      if (c.status !== 'FAILED' && c.status !== 'DEAD')
        refused.push({ msgId: c.msg_id, reason: `status is ${c.status}${c.archived ? ' (archived)' : ''}` });
      else if (!REPLAYABLE_CLASSES.includes(c.error_class as never))
        refused.push({ msgId: c.msg_id, reason: `${c.error_class} is not replayable (fix the message instead)` });
      else moved.push({ msgId: c.msg_id, status: c.status, errorClass: c.error_class!, ...(c.archived ? { archived: true } : {}) });
    }
    const known = new Set(candidates.map((c) => c.msg_id));
    for (const id of req.ids ?? []) if (!known.has(id)) refused.push({ msgId: id, reason: 'no such message' });

    const warnings: string[] = [];
    if (moved.length > 0) {
      const oldest = moved[0]!.msgId;
      const newer = await tx.query<{ n: number }>(
        `SELECT (SELECT count(*) FROM proc_state WHERE msg_id > $1 AND status = 'SUCCEEDED')::int
              + (SELECT count(*) FROM proc_state_hst WHERE msg_id > $1 AND status = 'SUCCEEDED')::int AS n`,
        [oldest],
      );
      if (newer.rows[0]!.n > 0)
        warnings.push(
          `${newer.rows[0]!.n} newer message(s) already succeeded after #${oldest}: replaying may overwrite newer flight state (re-queueing does not restore the original order)`,
        );
    }
    if (!req.dryRun && moved.length > 0) {
      const ids = moved.filter((m) => !m.archived).map((m) => m.msgId);
      const back = moved.filter((m) => m.archived).map((m) => m.msgId);
      await tx.query(
        `UPDATE proc_state SET status = 'PENDING', attempts = 0, next_attempt_at = $2, first_attempt_at = NULL,
           error_class = NULL, error_detail = NULL, finished_at = NULL, updated_at = $2
         WHERE msg_id = ANY($1::bigint[])`,
        [ids, now],
      );
      if (back.length > 0)
        await tx.query(
          `WITH back AS (DELETE FROM proc_state_hst WHERE msg_id = ANY($1::bigint[]) AND status = 'DEAD' RETURNING *)
           INSERT INTO proc_state (msg_id, status, identity_key, msg_type, msg_subtype, attempts, next_attempt_at,
             first_attempt_at, error_class, error_detail, note, raw_text, received_at, enqueued_at, updated_at, finished_at)
           SELECT msg_id, 'PENDING', NULL, msg_type, msg_subtype, 0, $2, NULL, NULL, NULL, note, raw_text, received_at,
             enqueued_at, $2, NULL FROM back`,
          [back, now],
        );
      await tx.query(`DELETE FROM backfill_todo WHERE msg_id = ANY($1::bigint[])`, [[...ids, ...back]]);
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

interface Candidate {
  msg_id: number;
  status: string;
  error_class: string | null;
  archived: boolean;
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
