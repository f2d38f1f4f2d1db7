import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import type { OffsetsPosition } from './publishers/kafkaTransactional.ts';

/*
 * The cursor as it travels (docs/outbox.md "The log and its cursors"): a target's cursor is the
 * snapshot its last batch ended at, the one its open batch ends at, and the last event passed in
 * it. With exactly once it is committed to Kafka with each batch and adopted from there at start;
 * the reads and finishes themselves are lib/outbox/logLease.ts and logBatch.ts.
 */

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

/**
 * Where the offsets record of the target's cursor in PostgreSQL landed (migration 018), written by
 * the finish that mirrored it; null when the cursor moved since without a Kafka commit, or never
 * was committed from here.
 */
export async function mirroredPosition(db: Queryable, target: string): Promise<OffsetsPosition | null> {
  const r = await db.query<{ topic: string | null; partition: number | null; offset: string | null; partitions: number | null }>(
    prepared(`SELECT offsets_topic AS topic, offsets_partition AS partition, offsets_offset AS offset, offsets_partitions AS partitions
     FROM outbox_target WHERE target = $1`),
    [target],
  );
  const p = r.rows[0];
  if (!p || p.topic === null || p.partition === null || p.offset === null || p.partitions === null) return null;
  return { topic: p.topic, partition: p.partition, offset: Number(p.offset), partitions: p.partitions };
}
