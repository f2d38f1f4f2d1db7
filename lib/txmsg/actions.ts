import type { Queryable } from '../db/db.ts';
import type { AppContext } from '../app/context.ts';
import { startSchedule } from './delivery.ts';
import { TxIllegalTransitionError, TxNotFoundError } from './errors.ts';
import { move } from './move.ts';
import type { TxStatus } from './states.ts';
import { findMessage, lockMessage, updateMessage, type TxRow } from './store.ts';
import { appendTrace } from './trace.ts';

/** What producers and consumers may ask for over the API (and what a check-back answer means). */
export type TxAction = 'commit' | 'rollback' | 'ack';

/**
 * States in which the action has already taken effect: repeating it is a no-op, not an error
 * (the first answer may have been lost on the way back to the caller).
 */
function alreadyDone(action: TxAction, row: TxRow): boolean {
  switch (action) {
    case 'commit':
      return ['COMMITTED', 'DELIVERED', 'CONSUMED'].includes(row.status) || (row.status === 'DEAD' && row.dead_phase === 'delivery');
    case 'rollback':
      return row.status === 'ROLLED_BACK';
    case 'ack':
      return row.status === 'CONSUMED';
  }
}

/**
 * Applies a producer/consumer action to a row the caller has locked. Returns the row as it is
 * afterwards and whether anything changed.
 */
export async function applyAction(
  tx: Queryable,
  row: TxRow,
  action: TxAction,
  now: Date,
  scheduleMs: number[],
  detail: Record<string, unknown> = {},
): Promise<{ row: TxRow; changed: boolean }> {
  if (alreadyDone(action, row)) {
    await appendTrace(tx, row.id, now, 'noop', row.status, { action, ...detail });
    return { row, changed: false };
  }
  switch (action) {
    case 'commit': {
      if (row.status !== 'PREPARED') throw new TxIllegalTransitionError(row.id, action, row.status, reasonFor(action, row));
      const moved = await move(
        tx,
        row,
        'commit',
        now,
        { committed_at: now, next_check_at: null, dead_phase: null, dead_reason: null },
        { detail },
      );
      // After the move, so the trace reads commit → enqueue.
      return { row: await updateMessage(tx, row.id, await startSchedule(tx, moved, now, scheduleMs)), changed: true };
    }
    case 'rollback':
      if (row.status !== 'PREPARED') throw new TxIllegalTransitionError(row.id, action, row.status, reasonFor(action, row));
      return { row: await move(tx, row, 'rollback', now, { finished_at: now, next_check_at: null }, { detail }), changed: true };
    case 'ack':
      // A message that died before commit was never delivered: nobody can have consumed it.
      if (row.status === 'DEAD' && row.dead_phase !== 'delivery')
        throw new TxIllegalTransitionError(row.id, action, row.status, reasonFor(action, row));
      return { row: await move(tx, row, 'ack', now, { finished_at: now, next_delivery_at: null }, { detail }), changed: true };
  }
}

function reasonFor(action: TxAction, row: TxRow): string {
  const s: TxStatus = row.status;
  if (action === 'ack') return `cannot ack message ${row.id}: it is ${s}${s === 'PREPARED' ? ' (not committed, never delivered)' : ''}`;
  if (action === 'commit' && s === 'ROLLED_BACK') return `cannot commit message ${row.id}: it was rolled back`;
  if (action === 'rollback' && s !== 'DEAD') return `cannot roll back message ${row.id}: it was committed (${s})`;
  if (s === 'DEAD') return `cannot ${action} message ${row.id}: it is DEAD (${row.dead_reason ?? 'no reason'}); an operator can resend it`;
  return `cannot ${action} message ${row.id} in state ${s}`;
}

/** The API entry: one short transaction around the locked row. */
export async function runAction(
  ctx: Pick<AppContext, 'db' | 'clock' | 'config'>,
  id: string,
  action: TxAction,
): Promise<{ id: string; status: TxStatus }> {
  const result = await ctx.db.tx(async (tx) => {
    const row = await lockMessage(tx, id);
    if (!row) return undefined;
    return (await applyAction(tx, row, action, ctx.clock.now(), ctx.config.txmsg.redeliveryScheduleMs, { via: 'api' })).row;
  });
  if (result) return { id: result.id, status: result.status };
  // Archived messages are terminal: a repeated ack/rollback on them is still a no-op.
  const archived = await findMessage(ctx.db, id);
  if (!archived) throw new TxNotFoundError(id);
  if (alreadyDone(action, archived)) return { id, status: archived.status };
  throw new TxIllegalTransitionError(id, action, archived.status, reasonFor(action, archived));
}
