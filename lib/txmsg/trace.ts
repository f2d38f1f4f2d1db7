import type { Queryable } from '../db/db.ts';
import type { TxStatus } from './states.ts';

/** All SQL on tx_message_log: the trace of a message, appended in the transaction that did the work. */
export type TraceKind =
  'prepare' | 'commit' | 'rollback' | 'check' | 'enqueue' | 'sent' | 'delivery-failed' | 'redeliver' | 'ack' | 'dead' | 'resend' | 'noop';

export interface TraceEntry {
  seq: number;
  at: Date;
  kind: TraceKind;
  status: TxStatus | null;
  detail: Record<string, unknown>;
}

export async function appendTrace(
  q: Queryable,
  txId: string,
  at: Date,
  kind: TraceKind,
  status: TxStatus | null,
  detail: Record<string, unknown> = {},
): Promise<void> {
  await q.query(`INSERT INTO tx_message_log (tx_id, at, kind, status, detail) VALUES ($1, $2, $3, $4, $5::jsonb)`, [
    txId,
    at,
    kind,
    status,
    JSON.stringify(detail),
  ]);
}

export async function readTrace(q: Queryable, txId: string): Promise<TraceEntry[]> {
  const r = await q.query<TraceEntry>(`SELECT seq, at, kind, status, detail FROM tx_message_log WHERE tx_id = $1 ORDER BY seq`, [txId]);
  return r.rows;
}
