import type { AppContext } from '../app/context.ts';
import { loadFrontier, markLate, readRescanCursor, unknownIds, writeRescanCursor } from './frontier.ts';
import { enqueueMessages } from './procState.ts';

/**
 * The sweep's controlled re-scan (docs/ordering.md "Holes and late rows"): walks the mailbox below the frontier, a bounded
 * slice per run from a persisted cursor, and enqueues any unprocessed row msgx has never seen — a
 * row that committed after its hole stopped being re-checked, or one an older poller missed. So no
 * row depends on a window size. Starts over from the bottom when it reaches the frontier.
 */
export async function rescanOnce(
  ctx: Pick<AppContext, 'db' | 'mailbox' | 'clock' | 'log'>,
  limit = 1000,
): Promise<{ scanned: number; enqueued: number; cursor: number }> {
  const now = ctx.clock.now();
  const [{ frontier }, cursor] = await Promise.all([loadFrontier(ctx.db, now), readRescanCursor(ctx.db)]);
  const rows = await ctx.mailbox.scanUnprocessed(cursor, limit, frontier.accounted);
  const unknown = new Set(
    await unknownIds(
      ctx.db,
      rows.map((r) => r.id),
    ),
  );
  const next = rows.length < limit ? 0 : rows[rows.length - 1]!.id;
  const enqueued = await ctx.db.tx(async (tx) => {
    const ids = await enqueueMessages(
      tx,
      rows.filter((r) => unknown.has(r.id)),
      now,
    );
    await markLate(tx, ids, 'rescan', now);
    await writeRescanCursor(tx, next, now);
    return ids;
  });
  for (const id of enqueued) ctx.log.warn('re-scan found an unprocessed mailbox row msgx never saw; processing it late', { msgId: id });
  return { scanned: rows.length, enqueued: enqueued.length, cursor: next };
}
