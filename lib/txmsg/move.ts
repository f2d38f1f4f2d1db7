import type { Queryable } from '../db/db.ts';
import { TxIllegalTransitionError } from './errors.ts';
import { nextStatus, type TxEvent } from './states.ts';
import { updateMessage, type TxPatch, type TxRow } from './store.ts';
import { appendTrace, type TraceKind } from './trace.ts';

/**
 * Applies `event` to a row locked by the caller: checks the transition table, writes the new
 * status with `patch`, and appends the trace entry — all in the caller's transaction.
 */
export async function move(
  tx: Queryable,
  row: TxRow,
  event: TxEvent,
  now: Date,
  patch: TxPatch = {},
  trace: { kind?: TraceKind; detail?: Record<string, unknown> } = {},
): Promise<TxRow> {
  const to = nextStatus(row.status, event);
  if (!to) throw new TxIllegalTransitionError(row.id, event, row.status);
  const updated = await updateMessage(tx, row.id, { ...patch, status: to, updated_at: now });
  await appendTrace(tx, row.id, now, trace.kind ?? traceKindOf(event), to, { event, from: row.status, ...trace.detail });
  return updated;
}

function traceKindOf(event: TxEvent): TraceKind {
  switch (event) {
    case 'commit':
    case 'rollback':
    case 'sent':
    case 'ack':
    case 'redeliver':
    case 'delivery-failed':
      return event;
    case 'checks-exhausted':
    case 'unacked':
      return 'dead';
    case 'resend-unconfirmed':
    case 'resend-delivered':
      return 'resend';
  }
}
