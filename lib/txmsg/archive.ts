import type { AppContext } from '../app/context.ts';
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
