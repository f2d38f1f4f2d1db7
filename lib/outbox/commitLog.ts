import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';

/**
 * The outbox read as a commit-ordered log (docs/outbox.md "The log and its cursors"). A target's
 * batch is what committed between two snapshots: the one its last batch ended at and one taken
 * when the batch opens, in event_id order within it. An event whose transaction commits late is
 * in the batch of its commit, so no cursor passes it unseen. Reading and finishing a batch each
 * write the target's one cursor row, whatever the batch holds.
 */
export interface LogEvent {
  eventId: number;
  key: string | null;
  type: string;
  value: string | null;
  headers: Record<string, string>;
}

export interface LogBatch {
  target: string;
  /** The snapshot the batch starts after, as text. */
  snapLo: string;
  /** The snapshot the batch ends at, as text: finishBatch names the batch by it. */
  snapHi: string;
  events: LogEvent[];
  /** Nothing of the batch is left after these events. */
  drained: boolean;
}

/** Starts a target's cursor at the current snapshot (what committed before it is not read). */
export async function openCursor(db: Queryable, target: string): Promise<void> {
  await db.query(
    prepared(`INSERT INTO outbox_target (target, snap_lo) VALUES ($1, pg_current_snapshot())
       ON CONFLICT (target) DO UPDATE SET snap_lo = coalesce(outbox_target.snap_lo, EXCLUDED.snap_lo)`),
    [target],
  );
}

/** The next events of the target's open batch (opening one at the current snapshot if none is). */
export async function readBatch(db: Queryable, target: string, limit: number): Promise<LogBatch | null> {
  const r = await db.query<{
    lo: string;
    hi: string;
    event_id: string | null;
    partition_key: string | null;
    event_type: string | null;
    value: string | null;
    headers: Record<string, string> | null;
  }>(
    prepared(`WITH cur AS (
       UPDATE outbox_target SET snap_hi = coalesce(snap_hi, pg_current_snapshot())
       WHERE target = $1 AND snap_lo IS NOT NULL RETURNING snap_lo, snap_hi, after_id)
     SELECT c.snap_lo::text AS lo, c.snap_hi::text AS hi, e.event_id, e.partition_key, e.event_type, e.value, e.headers
     FROM cur c LEFT JOIN LATERAL (
       SELECT m.event_id, m.partition_key, m.event_type, m.value, m.headers FROM msg_event m
       WHERE m.target = $1
         AND m.writer_xid >= pg_snapshot_xmin(c.snap_lo) AND m.writer_xid < pg_snapshot_xmax(c.snap_hi)
         AND pg_visible_in_snapshot(m.writer_xid, c.snap_hi) AND NOT pg_visible_in_snapshot(m.writer_xid, c.snap_lo)
         AND m.event_id > c.after_id
       ORDER BY m.event_id LIMIT $2) e ON true
     ORDER BY e.event_id`),
    [target, limit],
  );
  if (r.rows.length === 0) return null;
  const events: LogEvent[] = r.rows
    .filter((row) => row.event_id !== null)
    .map((row) => ({
      eventId: Number(row.event_id),
      key: row.partition_key,
      type: row.event_type ?? '',
      value: row.value,
      headers: row.headers ?? {},
    }));
  return { target, snapLo: r.rows[0]!.lo, snapHi: r.rows[0]!.hi, events, drained: events.length < limit };
}

/**
 * Moves the cursor past a delivered batch read: to the end of the batch when it was drained,
 * else past its last event. False when the batch was no longer the target's open one.
 */
export async function finishBatch(db: Queryable, batch: LogBatch): Promise<boolean> {
  const last = batch.events.at(-1)?.eventId ?? 0;
  const r = await db.query(
    prepared(`UPDATE outbox_target SET
       snap_lo = CASE WHEN $3 THEN snap_hi ELSE snap_lo END,
       snap_hi = CASE WHEN $3 THEN NULL ELSE snap_hi END,
       after_id = CASE WHEN $3 THEN 0 ELSE greatest(after_id, $4) END,
       updated_at = now()
     WHERE target = $1 AND snap_hi::text = $2`),
    [batch.target, batch.snapHi, batch.drained, last],
  );
  return r.rowCount === 1;
}

/** Where a target's cursor stands: as a finished batch leaves it, and as Kafka keeps it (exactly once). */
export interface Cursor {
  snapLo: string;
  snapHi: string | null;
  afterId: number;
  /** The database whose log the cursor reads (databaseIdentity); absent in cursors written before it was recorded. */
  db?: string;
}

/**
 * Names this database among all others: the cluster's system identifier and the database's oid.
 * A cursor committed to Kafka carries it, so a fresh database (another cluster, or a database
 * created anew in the same one) never adopts a cursor that reads someone else's log.
 */
export async function databaseIdentity(db: Queryable): Promise<string> {
  const r = await db.query<{ id: string }>(
    prepared(`SELECT (SELECT system_identifier FROM pg_control_system())::text || '/' ||
       (SELECT oid FROM pg_database WHERE datname = current_database())::text AS id`),
  );
  return r.rows[0]!.id;
}

/** Why a cursor committed elsewhere was not adopted, or null when it was. */
export type AdoptRefusal = string | null;

/**
 * Sets the target's cursor to one committed elsewhere (the Kafka offsets topic, which is ahead of
 * PostgreSQL when a dispatcher died between its Kafka commit and the mirror) — only when it reads
 * this database's log: written by this database, and not past the transactions this database has
 * seen (a database restored from a backup is behind the cursor its older self committed, and
 * adopting it would skip what it now writes).
 */
export async function adoptCursor(db: Queryable, target: string, c: Cursor, identity: string): Promise<AdoptRefusal> {
  if (c.db !== undefined && c.db !== identity) return `it was written by database ${c.db}, this is ${identity}`;
  const r = await db.query(
    prepared(`INSERT INTO outbox_target (target, snap_lo, snap_hi, after_id, updated_at)
     SELECT $1, $2::pg_snapshot, $3::pg_snapshot, $4, now()
     WHERE pg_snapshot_xmax(coalesce($3, $2)::pg_snapshot) <= pg_snapshot_xmax(pg_current_snapshot())
     ON CONFLICT (target) DO UPDATE SET snap_lo = EXCLUDED.snap_lo, snap_hi = EXCLUDED.snap_hi,
       after_id = EXCLUDED.after_id, updated_at = now()`),
    [target, c.snapLo, c.snapHi, c.afterId],
  );
  return r.rowCount === 1 ? null : `it is ahead of this database's transactions (${c.snapHi ?? c.snapLo})`;
}

/** The state of one event as its target's cursor, lease and exceptions say. */
export async function derivedState(db: Queryable, eventId: number, now: Date): Promise<string | null> {
  const r = await db.query<{ state: string }>(
    prepared(`SELECT msgx_outbox_state(target, event_id, writer_xid, $2) AS state FROM msg_event WHERE event_id = $1`),
    [eventId, now],
  );
  return r.rows[0]?.state ?? null;
}
