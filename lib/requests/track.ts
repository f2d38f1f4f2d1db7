import type { Queryable } from '../db/db.ts';

/** All SQL on req_track: requests msgx sends upstream and their answers. */

export type ReqStatus = 'REGISTERED' | 'SENT' | 'DONE' | 'EXPIRED';
export type ReqKind = 'RQFD' | 'RQRF';

/** The request lifecycle as a transition table; anything else is refused. */
export const REQ_TRANSITIONS: Record<ReqStatus, readonly ReqStatus[]> = {
  REGISTERED: ['SENT', 'EXPIRED'],
  SENT: ['DONE', 'EXPIRED'],
  DONE: [],
  EXPIRED: [],
};
export const canMove = (from: ReqStatus, to: ReqStatus): boolean => REQ_TRANSITIONS[from].includes(to);

export interface ReqRow {
  id: number;
  kind: ReqKind;
  scope: string;
  /** SNDR and RCVR of its COUTMSGS row (MSGX_REQUEST_SENDER / _RECEIVER when it was registered). */
  sender: string;
  receiver: string;
  status: ReqStatus;
  registered_at: Date;
  sent_at: Date | null;
  outbound_id: number | null;
  closed_at: Date | null;
  close_reason: string | null;
  resp_msg_id: number | null;
  /** Reconciliations and how the answer was matched, in order (docs/flights.md "Requests"). */
  audit: AuditEntry[];
}

/** One entry of a request's own audit. */
export interface AuditEntry {
  at: string;
  what: 'reconciled' | 'reconcile-absent' | 'resent' | 'confirmed-by-answer' | 'answer-matched';
  [detail: string]: unknown;
}

const OPEN = `status IN ('REGISTERED', 'SENT')`;

/** Registers a new request; the open one of the same kind (if any) expires first ("superseded"). */
export async function registerRequest(
  q: Queryable,
  kind: ReqKind,
  scope: string,
  parties: { sender: string; receiver: string },
  now: Date,
): Promise<ReqRow> {
  await q.query(`UPDATE req_track SET status = 'EXPIRED', closed_at = $2, close_reason = 'superseded' WHERE kind = $1 AND ${OPEN}`, [
    kind,
    now,
  ]);
  const r = await q.query<ReqRow>(
    `INSERT INTO req_track (kind, scope, sender, receiver, status, registered_at) VALUES ($1, $2, $3, $4, 'REGISTERED', $5) RETURNING *`,
    [kind, scope, parties.sender, parties.receiver, now],
  );
  return r.rows[0]!;
}

/**
 * About to write the COUTMSGS row: sent_at is set while the request stays REGISTERED, so that a
 * write whose outcome is lost (a crash, an unconfirmed insert) is recognisable: REGISTERED with a
 * sent_at means "maybe written" and is reconciled against COUTMSGS before anything is resent.
 */
export async function markSendAttempt(q: Queryable, id: number, at: Date): Promise<boolean> {
  const r = await q.query(`UPDATE req_track SET sent_at = $2 WHERE id = $1 AND status = 'REGISTERED'`, [id, at]);
  return r.rowCount === 1;
}

/** Open requests whose COUTMSGS write was attempted but never confirmed. */
export async function listUnconfirmed(q: Queryable): Promise<ReqRow[]> {
  const r = await q.query<ReqRow>(`SELECT * FROM req_track WHERE status = 'REGISTERED' AND sent_at IS NOT NULL ORDER BY id`);
  return r.rows;
}

/** Appends to the request's own audit. */
export async function appendAudit(q: Queryable, id: number, entry: Omit<AuditEntry, 'at'>, at: Date): Promise<void> {
  await q.query(`UPDATE req_track SET audit = audit || $2::jsonb WHERE id = $1`, [
    id,
    JSON.stringify([{ at: at.toISOString(), ...entry }]),
  ]);
}

/** A request by ID, locked (an answer that echoes our request names it exactly). */
export async function lockRequest(q: Queryable, id: number): Promise<ReqRow | undefined> {
  const r = await q.query<ReqRow>(`SELECT * FROM req_track WHERE id = $1 FOR UPDATE`, [id]);
  return r.rows[0];
}

/** REGISTERED → SENT, only once the outbound row is confirmed. False when the request moved on meanwhile. */
export async function markSent(q: Queryable, id: number, outboundId: number | null, sentAt: Date): Promise<boolean> {
  const r = await q.query(`UPDATE req_track SET status = 'SENT', outbound_id = $2, sent_at = $3 WHERE id = $1 AND status = 'REGISTERED'`, [
    id,
    outboundId,
    sentAt,
  ]);
  return r.rowCount === 1;
}

/** The open request of a kind, locked so an answer and a timeout cannot both close it. */
export async function lockOpenRequest(q: Queryable, kind: ReqKind): Promise<ReqRow | undefined> {
  const r = await q.query<ReqRow>(`SELECT * FROM req_track WHERE kind = $1 AND ${OPEN} FOR UPDATE`, [kind]);
  return r.rows[0];
}

export async function closeRequest(
  q: Queryable,
  id: number,
  to: 'DONE' | 'EXPIRED',
  reason: string,
  now: Date,
  respMsgId: number | null = null,
): Promise<boolean> {
  const from = to === 'DONE' ? `status = 'SENT'` : OPEN;
  const r = await q.query(
    `UPDATE req_track SET status = $2, close_reason = $3, closed_at = $4, resp_msg_id = $5 WHERE id = $1 AND ${from}`,
    [id, to, reason, now, respMsgId],
  );
  return r.rowCount === 1;
}

/** Open requests older than the timeout (counted from sending, or from registering if never sent) expire. */
export async function expireOverdue(q: Queryable, now: Date, timeoutMs: number): Promise<ReqRow[]> {
  const r = await q.query<ReqRow>(
    `UPDATE req_track SET status = 'EXPIRED', closed_at = $1, close_reason = 'timeout'
     WHERE ${OPEN} AND coalesce(sent_at, registered_at) <= $2
     RETURNING *`,
    [now, new Date(now.getTime() - timeoutMs)],
  );
  return r.rows;
}

export async function getRequest(q: Queryable, id: number): Promise<ReqRow | undefined> {
  const r = await q.query<ReqRow>(`SELECT * FROM req_track WHERE id = $1`, [id]);
  return r.rows[0];
}
