import type { Queryable } from '../db/db.ts';
import type { MailboxRow } from '../mailbox/mailbox.ts';
import type { AppContext } from '../shared/context.ts';
import { enqueueMessages } from './procState.ts';

const WATERMARK = 'poller.watermark';

export interface PollResult {
  scanned: number;
  enqueued: number;
  watermark: number;
}

/**
 * Finds unprocessed mailbox rows and enqueues them idempotently. Closes seed 000 §10's gap: a
 * persisted watermark so a poll does not rescan from ID 0, plus a bounded look-back below it that
 * still finds a smaller ID whose insert committed late (MySQL hands out IDs before commit).
 * The watermark is not a "processed" mark: it only says where the fast path starts.
 */
export async function pollOnce(ctx: Pick<AppContext, 'db' | 'mailbox' | 'clock' | 'config'>): Promise<PollResult> {
  const { claimBatch, pollerLookback } = ctx.config.pipeline;
  const watermark = await readWatermark(ctx.db);
  const fresh = await ctx.mailbox.scanUnprocessed(watermark, claimBatch);
  const lookbackFrom = Math.max(0, watermark - pollerLookback);
  const late =
    pollerLookback > 0 && watermark > 0
      ? (await ctx.mailbox.scanUnprocessed(lookbackFrom, claimBatch)).filter((r) => r.id <= watermark)
      : [];
  const rows: MailboxRow[] = [...late, ...fresh];
  if (rows.length === 0) return { scanned: 0, enqueued: 0, watermark };
  const now = ctx.clock.now();
  const next = fresh.length ? fresh[fresh.length - 1]!.id : watermark;
  const enqueued = await ctx.db.tx(async (tx) => {
    const ids = await enqueueMessages(tx, rows.map((r) => ({ id: r.id, receivedAt: r.receivedAt })), now);
    if (next > watermark) await writeWatermark(tx, next, now);
    return ids.length;
  });
  return { scanned: rows.length, enqueued, watermark: next };
}

export async function readWatermark(q: Queryable): Promise<number> {
  const r = await q.query<{ value: { id: number } }>(`SELECT value FROM msgx_state WHERE key = $1`, [WATERMARK]);
  return r.rows[0]?.value.id ?? 0;
}

async function writeWatermark(q: Queryable, id: number, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO msgx_state (key, value, updated_at) VALUES ($1, $2, $3)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at
     WHERE (msgx_state.value->>'id')::bigint < $4`,
    [WATERMARK, JSON.stringify({ id }), now, id],
  );
}
