import type { AppContext } from '../app/context.ts';
import { enqueueDelivery } from './delivery.ts';
import { txmsgDeadHook, txmsgSentHook } from './hooks.ts';
import { move } from './move.ts';
import { lockDueDeliveries, settledInFlight, updateMessage } from './store.ts';

export interface RedeliverResult {
  enqueued: number;
  dead: number;
  /** In-flight deliveries settled from msg_event because a relay hook had not reported them. */
  reconciled: number;
}

/**
 * One bounded round of the redelivery timer (docs/txmsg.md "Delivery and redelivery"): every message whose next
 * delivery is due gets it, nearest its limit first; one unacknowledged after the last delivery of
 * MSGX_TX_REDELIVERY_SCHEDULE goes DEAD. Database only, one transaction, no external call.
 */
export async function redeliverOnce(ctx: Pick<AppContext, 'db' | 'clock' | 'config'>): Promise<RedeliverResult> {
  const { redeliveryScheduleMs: schedule, redeliveryBatch } = ctx.config.txmsg;
  const reconciled = await reconcile(ctx, redeliveryBatch);
  return ctx.db.tx(async (tx) => {
    const now = ctx.clock.now();
    let enqueued = 0;
    let dead = 0;
    for (const row of await lockDueDeliveries(tx, now, redeliveryBatch)) {
      if (row.status === 'DELIVERED' && row.attempts >= schedule.length) {
        await move(tx, row, 'unacked', now, {
          next_delivery_at: null,
          dead_phase: 'delivery',
          dead_reason: `unacknowledged after ${row.attempts} deliveries`,
        });
        dead++;
        continue;
      }
      const patch = await enqueueDelivery(tx, row, now, schedule);
      if (row.status === 'DELIVERED') await move(tx, row, 'redeliver', now, patch, { detail: { delivery: patch.attempts } });
      else await updateMessage(tx, row.id, { ...patch, updated_at: now }); // a delayed first delivery: still COMMITTED
      enqueued++;
    }
    return { enqueued, dead, reconciled };
  });
}

/**
 * Safety net: the hooks run inside the relay's own transaction, so they cannot be lost by a
 * crash, but a relay started without them wired would leave messages COMMITTED forever. Settle
 * deliveries whose event the relay has already finished (SENT or DEAD) as the hooks would have.
 */
async function reconcile(ctx: Pick<AppContext, 'db' | 'clock'>, limit: number): Promise<number> {
  return ctx.db.tx(async (tx) => {
    const settled = await settledInFlight(tx, limit);
    const now = ctx.clock.now();
    const asEvent = (s: (typeof settled)[number]) => ({ eventId: s.event_id, sourceKind: 'txmsg', sourceId: s.id, error: s.last_error });
    await txmsgSentHook(tx, settled.filter((s) => s.event_status === 'SENT').map(asEvent), now);
    await txmsgDeadHook(tx, settled.filter((s) => s.event_status === 'DEAD').map(asEvent), now);
    return settled.length;
  });
}
