import type { TxRow } from './store.ts';

/** The API shape of a message (`GET /v1/tx-messages/{id}`): camelCase, ISO times, ids as strings. */
export interface TxMessageView {
  id: string;
  topic: string;
  key: string | null;
  status: TxRow['status'];
  /** Deliveries handed to the relay under the current schedule. */
  attempts: number;
  /** Check-back calls made. */
  checks: number;
  payload: string;
  headers: Record<string, string>;
  checkUrl: string;
  createdAt: string;
  updatedAt: string;
  committedAt: string | null;
  deliveredAt: string | null;
  finishedAt: string | null;
  nextCheckAt: string | null;
  nextDeliveryAt: string | null;
  deadReason: string | null;
  lastError: string | null;
  /** The business the message belongs to, as the producer named it. */
  bizName: string | null;
  /** Who created the message, as the producer named them. */
  createdBy: string | null;
  /** The operator who last resent it (the x-msgx-actor of the resend), and when. */
  resentBy: string | null;
  resentAt: string | null;
  archived: boolean;
}

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

export function toView(r: TxRow): TxMessageView {
  return {
    id: r.id,
    topic: r.topic,
    key: r.msg_key,
    status: r.status,
    attempts: r.attempts,
    checks: r.checks,
    payload: r.payload,
    headers: r.headers,
    checkUrl: r.check_url,
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
    committedAt: iso(r.committed_at),
    deliveredAt: iso(r.delivered_at),
    finishedAt: iso(r.finished_at),
    nextCheckAt: r.status === 'PREPARED' ? iso(r.next_check_at) : null,
    nextDeliveryAt: iso(r.next_delivery_at),
    deadReason: r.dead_reason,
    lastError: r.last_error,
    bizName: r.biz_name,
    createdBy: r.created_by,
    resentBy: r.resent_by,
    resentAt: iso(r.resent_at),
    archived: r.archived_at !== undefined,
  };
}
