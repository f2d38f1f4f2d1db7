import type { Queryable } from '../db/db.ts';
import type { TxStatus } from './states.ts';

/**
 * All SQL on tx_message and tx_message_hst. A row is one message while it is live; terminal rows
 * move to history after retention (archive.ts) and stay readable through `findMessage`.
 */
export interface TxRow {
  id: string;
  topic: string;
  msg_key: string | null;
  payload: string;
  headers: Record<string, string>;
  check_url: string;
  check_after_ms: number;
  check_timeout_ms: number;
  status: TxStatus;
  checks: number;
  next_check_at: Date | null;
  attempts: number;
  in_flight_event_id: number | null;
  redeliver_after_ms: number | null;
  next_delivery_at: Date | null;
  dead_phase: 'check' | 'delivery' | null;
  dead_reason: string | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  committed_at: Date | null;
  delivered_at: Date | null;
  finished_at: Date | null;
  /** rtm's message-table fields (docs/txmsg.md "API"): msg_name, create_msg_uid, resend_msg_uid, resend_msg_time. */
  biz_name: string | null;
  created_by: string | null;
  resent_by: string | null;
  resent_at: Date | null;
  archived_at?: Date;
}

/** Columns a transition may set; the names come from this list, never from input. */
export type TxPatch = Partial<Omit<TxRow, 'id' | 'topic' | 'msg_key' | 'payload' | 'headers' | 'check_url' | 'created_at' | 'archived_at'>>;
const PATCHABLE = new Set<string>([
  'status',
  'checks',
  'next_check_at',
  'attempts',
  'in_flight_event_id',
  'redeliver_after_ms',
  'next_delivery_at',
  'dead_phase',
  'dead_reason',
  'last_error',
  'updated_at',
  'committed_at',
  'delivered_at',
  'finished_at',
  'check_after_ms',
  'check_timeout_ms',
  'resent_by',
  'resent_at',
]);

export type NewTxRow = Pick<
  TxRow,
  | 'id'
  | 'topic'
  | 'msg_key'
  | 'payload'
  | 'headers'
  | 'check_url'
  | 'check_after_ms'
  | 'check_timeout_ms'
  | 'next_check_at'
  | 'created_at'
  | 'biz_name'
  | 'created_by'
>;

export async function insertMessage(q: Queryable, m: NewTxRow): Promise<TxRow> {
  const r = await q.query<TxRow>(
    `INSERT INTO tx_message (id, topic, msg_key, payload, headers, check_url, check_after_ms, check_timeout_ms,
                             status, next_check_at, created_at, updated_at, biz_name, created_by)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, 'PREPARED', $9, $10, $10, $11, $12)
     RETURNING *`,
    [
      m.id,
      m.topic,
      m.msg_key,
      m.payload,
      JSON.stringify(m.headers),
      m.check_url,
      m.check_after_ms,
      m.check_timeout_ms,
      m.next_check_at,
      m.created_at,
      m.biz_name,
      m.created_by,
    ],
  );
  return r.rows[0]!;
}

/** The live row, locked for the rest of the caller's transaction. */
export async function lockMessage(q: Queryable, id: string): Promise<TxRow | undefined> {
  const r = await q.query<TxRow>(`SELECT * FROM tx_message WHERE id = $1 FOR UPDATE`, [id]);
  return r.rows[0];
}

/** The live row, else the archived one. */
export async function findMessage(q: Queryable, id: string): Promise<TxRow | undefined> {
  const live = await q.query<TxRow>(`SELECT * FROM tx_message WHERE id = $1`, [id]);
  if (live.rows[0]) return live.rows[0];
  const hst = await q.query<TxRow>(`SELECT * FROM tx_message_hst WHERE id = $1`, [id]);
  return hst.rows[0];
}

export async function updateMessage(q: Queryable, id: string, patch: TxPatch): Promise<TxRow> {
  const cols = Object.keys(patch).filter((k) => PATCHABLE.has(k));
  const sets = cols.map((c, i) => `${c} = $${i + 2}`);
  const r = await q.query<TxRow>(`UPDATE tx_message SET ${sets.join(', ')} WHERE id = $1 RETURNING *`, [
    id,
    ...cols.map((c) => (patch as Record<string, unknown>)[c]),
  ]);
  if (!r.rows[0]) throw new Error(`tx_message ${id} vanished while locked`);
  return r.rows[0];
}

/**
 * The relay failed a delivery it will retry: its error becomes the message's lastError at once
 *, so a producer polling GET sees why its message is not arriving. Only the delivery
 * in flight counts; an older one's error says nothing about the current state.
 */
export async function recordDeliveryError(q: Queryable, id: string, eventId: number, error: string): Promise<void> {
  await q.query(`UPDATE tx_message SET last_error = $3 WHERE id = $1 AND in_flight_event_id = $2 AND status = 'COMMITTED'`, [
    id,
    eventId,
    error,
  ]);
}

/**
 * Claims up to `limit` PREPARED messages whose check-back is due by pushing their next check past
 * the call's timeout: a second sweep instance (or the next round) skips them while the call runs,
 * and a sweep that crashes mid-call simply leaves them due again after the lease.
 */
export async function claimDueChecks(q: Queryable, now: Date, limit: number, leaseMs: number): Promise<TxRow[]> {
  const r = await q.query<TxRow>(
    `UPDATE tx_message m SET next_check_at = $1::timestamptz + make_interval(secs => (m.check_timeout_ms + $3) / 1000.0)
     WHERE m.id IN (SELECT id FROM tx_message WHERE status = 'PREPARED' AND next_check_at <= $1
                    ORDER BY next_check_at LIMIT $2 FOR UPDATE SKIP LOCKED)
     RETURNING m.*`,
    [now, limit, leaseMs],
  );
  return r.rows;
}

/**
 * Messages whose next delivery (or death) is due, nearest their limit first (docs/txmsg.md "Delivery and redelivery"), locked.
 * COMMITTED rows without an event in flight are waiting for a delayed first delivery.
 */
export async function lockDueDeliveries(q: Queryable, now: Date, limit: number): Promise<TxRow[]> {
  const r = await q.query<TxRow>(
    `SELECT * FROM tx_message
     WHERE (status = 'DELIVERED' OR (status = 'COMMITTED' AND in_flight_event_id IS NULL))
       AND next_delivery_at <= $1
     ORDER BY attempts DESC, next_delivery_at, id
     LIMIT $2 FOR UPDATE SKIP LOCKED`,
    [now, limit],
  );
  return r.rows;
}

/** In-flight deliveries the relay has already settled (SENT or DEAD) — a safety net for a missed hook. */
export async function settledInFlight(
  q: Queryable,
  limit: number,
): Promise<{ id: string; event_id: number; event_status: 'SENT' | 'DEAD'; sent_at: Date | null; last_error: string | null }[]> {
  const r = await q.query<{ id: string; event_id: number; event_status: 'SENT' | 'DEAD'; sent_at: Date | null; last_error: string | null }>(
    // The event's state as the relay derives it (msgx_event_state, migration 014), not a stored column.
    `SELECT id, event_id, event_status, sent_at, last_error FROM (
       SELECT m.id, e.event_id, msgx_event_state(e.status, e.target, e.event_id, e.writer_xid, now()) AS event_status,
              e.sent_at, coalesce((SELECT d.last_error FROM msgx_outbox_dead() d WHERE d.event_id = e.event_id), e.last_error) AS last_error
       FROM tx_message m JOIN msg_event e ON e.event_id = m.in_flight_event_id
       WHERE m.status = 'COMMITTED') s
     WHERE event_status IN ('SENT', 'DEAD')
     ORDER BY event_id LIMIT $1`,
    [limit],
  );
  return r.rows;
}

export interface DeadFilter {
  /** 'check': died unconfirmed; 'delivery': died after commit. */
  phase?: 'check' | 'delivery';
  topic?: string;
  /** Keyset paging: ids greater than this. */
  after?: string;
  limit?: number;
}

export async function listDead(q: Queryable, f: DeadFilter = {}): Promise<TxRow[]> {
  const r = await q.query<TxRow>(
    `SELECT * FROM tx_message
     WHERE status = 'DEAD' AND ($1::text IS NULL OR dead_phase = $1) AND ($2::text IS NULL OR topic = $2)
       AND ($3::text IS NULL OR id > $3)
     ORDER BY id LIMIT $4`,
    [f.phase ?? null, f.topic ?? null, f.after ?? null, Math.min(Math.max(f.limit ?? 100, 1), 1000)],
  );
  return r.rows;
}

/** A dead message not yet reported by the dead-letter monitor (lib/txmsg/dead.ts). */
export interface UnreportedDead {
  id: string;
  topic: string;
  dead_phase: string | null;
  dead_reason: string | null;
  attempts: number;
  checks: number;
  biz_name: string | null;
  updated_at: Date;
}

/** Marks up to `limit` dead messages reported and returns them (the oldest deaths first). */
export async function claimUnreportedDead(q: Queryable, now: Date, limit: number): Promise<UnreportedDead[]> {
  const r = await q.query<UnreportedDead>(
    `UPDATE tx_message m SET dead_reported_at = $1
     WHERE m.id IN (SELECT id FROM tx_message
                    WHERE status = 'DEAD' AND (dead_reported_at IS NULL OR dead_reported_at < updated_at)
                    ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)
     RETURNING m.id, m.topic, m.dead_phase, m.dead_reason, m.attempts, m.checks, m.biz_name, m.updated_at`,
    [now, limit],
  );
  return r.rows.sort((a, b) => a.updated_at.getTime() - b.updated_at.getTime());
}

/** Moves terminal rows finished before `before` to history, at most `limit`; returns how many. */
export async function archiveFinished(q: Queryable, before: Date, limit: number, now: Date): Promise<number> {
  const r = await q.query(
    `WITH moved AS (
       DELETE FROM tx_message WHERE id IN (
         SELECT id FROM tx_message WHERE status IN ('CONSUMED', 'ROLLED_BACK') AND finished_at <= $1
         ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING *)
     -- By column name, not position: columns added later sit after archived_at in the history table.
     INSERT INTO tx_message_hst
     SELECT (jsonb_populate_record(NULL::tx_message_hst, to_jsonb(moved) || jsonb_build_object('archived_at', $3::timestamptz))).*
     FROM moved`,
    [before, limit, now],
  );
  return r.rowCount;
}
