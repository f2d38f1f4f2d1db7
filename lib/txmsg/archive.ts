import type { AppContext } from '../app/context.ts';
import type { Queryable } from '../db/db.ts';
import { archiveFinished } from './store.ts';

const ARCHIVE_BATCH = 1000;

/**
 * Moves CONSUMED and ROLLED_BACK messages older than MSGX_TX_RETENTION to tx_message_hst
 * (docs/txmsg.md "Dead, resend, history"), a bounded batch per call so one sweep round
 * never holds a long transaction. Their trace and idempotency keys stay.
 */
export async function archiveConsumed(ctx: Pick<AppContext, 'db' | 'clock' | 'config'>): Promise<{ archived: number }> {
  const now = ctx.clock.now();
  const before = new Date(now.getTime() - ctx.config.txmsg.retentionMs);
  const archived = await ctx.db.tx((tx) => archiveFinished(tx, before, ARCHIVE_BATCH, now));
  return { archived };
}

/**
 * The lowest msg_event id a transactional message still points at (its delivery in flight, whose
 * settling the safety net reads from msg_event): the outbox's event retention keeps it and above.
 */
export async function oldestInFlightEvent(q: Queryable): Promise<number | null> {
  const r = await q.query<{ id: string | null }>(
    `SELECT min(in_flight_event_id)::text AS id FROM tx_message WHERE in_flight_event_id IS NOT NULL`,
  );
  return r.rows[0]?.id == null ? null : Number(r.rows[0].id);
}
