import type { AppContext } from '../app/context.ts';
import { writeAudit } from '../audit/audit.ts';
import { startSchedule } from './delivery.ts';
import { TxIllegalTransitionError, TxNotFoundError } from './errors.ts';
import { move } from './move.ts';
import type { TxStatus } from './states.ts';
import { lockMessage, updateMessage } from './store.ts';

/**
 * Operator resend of a DEAD message (docs/txmsg.md "Dead, resend, history"). One that died
 * unconfirmed goes back to PREPARED and is checked again at once; one that died after commit goes
 * back to COMMITTED and is delivered again on a fresh schedule. Audited in audit_log, in the same
 * transaction as the move.
 */
export async function resend(
  ctx: Pick<AppContext, 'db' | 'clock' | 'config'>,
  id: string,
  actor: string,
): Promise<{ id: string; status: TxStatus; from: string }> {
  return ctx.db.tx(async (tx) => {
    const now = ctx.clock.now();
    const row = await lockMessage(tx, id);
    if (!row) throw new TxNotFoundError(id);
    if (row.status !== 'DEAD')
      throw new TxIllegalTransitionError(id, 'resend', row.status, `only a DEAD message can be resent; ${id} is ${row.status}`);
    // rtm's resend_msg_uid / resend_msg_time (docs/txmsg.md "API"): the last operator who resent it, and when.
    const cleared = { dead_phase: null, dead_reason: null, last_error: null, resent_by: actor, resent_at: now };
    const updated =
      row.dead_phase === 'check'
        ? await move(
            tx,
            row,
            'resend-unconfirmed',
            now,
            { ...cleared, checks: 0, next_check_at: now },
            { detail: { actor, reason: row.dead_reason } },
          )
        : await updateMessage(
            tx,
            id,
            await startSchedule(
              tx,
              await move(tx, row, 'resend-delivered', now, cleared, { detail: { actor, reason: row.dead_reason } }),
              now,
              ctx.config.txmsg.redeliveryScheduleMs,
            ),
          );
    await writeAudit(tx, {
      at: now,
      actor,
      action: 'txmsg.resend',
      detail: { id, deadPhase: row.dead_phase, deadReason: row.dead_reason, to: updated.status },
    });
    return { id, status: updated.status, from: row.dead_phase ?? 'delivery' };
  });
}
