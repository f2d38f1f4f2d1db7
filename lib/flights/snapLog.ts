import type { Queryable } from '../db/db.ts';

/** All SQL on schd_snap_log: one row per applied snapshot package, kept for the configured days. */
export interface SnapLogEntry {
  msgId: number;
  styp: string;
  scope: string | null;
  dttm: Date | null;
  receivedAt: Date;
  declared: number | null;
  flights: number;
  created: number;
  updated: number;
  unchanged: number;
  stale: number;
  requestId: number | null;
}

export async function logSnapshot(q: Queryable, e: SnapLogEntry): Promise<void> {
  await q.query(
    `INSERT INTO schd_snap_log (msg_id, styp, scope, dttm, received_at, declared, flights, created, updated, unchanged, stale, request_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [e.msgId, e.styp, e.scope, e.dttm, e.receivedAt, e.declared, e.flights, e.created, e.updated, e.unchanged, e.stale, e.requestId],
  );
}

/**
 * Drops the rows past retention by (scope end, receipt): a package goes once both the day it
 * covers (`scope`, its operation day, yyyyMMdd in airport time) and the time it arrived are older
 * than the cutoff. A plan received long ago for a day still ahead is kept while that day is
 * recent; a row without a scope goes by its receipt alone.
 */
export async function purgeSnapLog(q: Queryable, before: Date, beforeDay: string): Promise<number> {
  const r = await q.query(`DELETE FROM schd_snap_log WHERE received_at < $1 AND (scope IS NULL OR scope < $2)`, [before, beforeDay]);
  return r.rowCount;
}

/** The snapshot rows a message wrote (for its trace). */
export async function snapLogOf(q: Queryable, msgId: number): Promise<Record<string, unknown>[]> {
  const r = await q.query<Record<string, unknown>>(
    `SELECT styp, scope, dttm, received_at, declared, flights, created, updated, unchanged, stale, request_id
     FROM schd_snap_log WHERE msg_id = $1 ORDER BY id`,
    [msgId],
  );
  return r.rows;
}
