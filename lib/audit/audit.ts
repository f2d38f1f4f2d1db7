import type { Queryable } from '../db/db.ts';

/**
 * audit_log: who did which operator action, when (docs/http.md "Audit actor"). This file is its
 * only writer and its only reader. Every record is written by the module that did the action, in
 * the transaction of the action, so the record and the change commit together or not at all.
 * The actor comes from the one actor rule (lib/http/actor.ts: `actorOf` for an admin request,
 * `cliActor` for a command run on the database directly), never from elsewhere.
 */
export interface AuditRecord {
  at: Date;
  actor: string;
  /** `<area>.<verb>`: `replay.proc`, `replay.proc.dry-run`, `outbox.replay`, `txmsg.resend`, `pipeline.pause`, `pipeline.resume`, `identity.day-boundary`. */
  action: string;
  /** What the action did, as JSON (`{}` when there is nothing to add). */
  detail?: unknown;
}

export interface AuditEntry {
  at: Date;
  actor: string;
  action: string;
}

/** Writes one audit record on `q` (the action's own transaction). */
export async function writeAudit(q: Queryable, r: AuditRecord): Promise<void> {
  await q.query(`INSERT INTO audit_log (at, actor, action, detail) VALUES ($1, $2, $3, $4::jsonb)`, [
    r.at,
    r.actor,
    r.action,
    JSON.stringify(r.detail ?? {}),
  ]);
}

/**
 * The records of these actions whose `detail.<key>` (a JSON array) contains `value`, oldest
 * first: e.g. the replays that moved one message (`moved` contains its msg id).
 */
export async function auditNaming(q: Queryable, actions: readonly string[], key: string, value: unknown): Promise<AuditEntry[]> {
  const r = await q.query<AuditEntry>(
    `SELECT at, actor, action FROM audit_log
     WHERE action = ANY($1::text[]) AND detail->$2 @> $3::jsonb ORDER BY id`,
    [actions, key, JSON.stringify([value])],
  );
  return r.rows;
}
