import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AppContext } from '../../lib/app/context.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { decodeCounts } from '../../lib/pipeline/decodeCache.ts';
import { pumpOnce } from '../../lib/pipeline/pump.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { drainPoller, makeContext, wire } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';
import { createEffectTables, testRegistry } from '../helpers/testProcessors.ts';

/**
 * The pump decodes a message once: a head that fails and is retried, the large messages waiting
 * behind it (read again with every retry), and a message whose decode itself fails and is retried
 * (CODEC_ERROR) each cost one decode, however many steps they take part in. Counted with the
 * process's decode counter (lib/pipeline/decodeCache.ts). Breaking decodeOnce (always running the
 * decode) makes this fail: the counter then counts every retry.
 */
let pg: TestPg;
let ctx: AppContext;
const clock = new FakeClock('2026-11-29T00:00:00Z');

beforeAll(async () => {
  pg = await freshPg();
  const mailbox = new PgMailbox(pg.db);
  await mailbox.ensureTables();
  await createEffectTables(pg.db);
  ctx = makeContext({ db: pg.db, mailbox, clock, registry: testRegistry(), env: { MSGX_LOG_LEVEL: 'SILENT' } });
});
afterAll(async () => {
  await pg?.drop();
});

it('a retried head, the large messages behind it and a retried decode failure are each decoded once', async () => {
  const pad = 'x'.repeat(200_000);
  const texts = [
    wire({ TYPE: 'TEST', SEQN: 1 }, '<TEST><FAILTIMES>3</FAILTIMES></TEST>'),
    ...[2, 3, 4, 5].map((n) => wire({ TYPE: 'TEST', SEQN: n }, `<TEST><PAD>${pad}</PAD></TEST>`)),
    // A gate collection holding text: CODEC_ERROR at decode, retried until EXHAUSTED.
    wire({ TYPE: 'FLOP', STYP: 'GATE', SEQN: 6 }, '<FLOP><FLIGHT><FLID>1</FLID><GATE>B12</GATE></FLIGHT></FLOP>'),
    wire({ TYPE: 'TEST', SEQN: 7 }),
  ];
  for (const t of texts) await ctx.mailbox.insertInbound(t);
  expect(await drainPoller(ctx)).toBe(texts.length);

  const before = decodeCounts();
  let steps = 0;
  for (; steps < 200; steps++) {
    const r = await pumpOnce(ctx);
    if (r.kind === 'idle') break;
    if (r.kind === 'waiting') clock.advance(Math.max(1, r.untilMs - clock.now().getTime()));
  }
  const after = decodeCounts();

  const rows = (
    await pg.db.query<{ status: string; error_class: string | null; attempts: number }>(
      `SELECT status, error_class, attempts FROM proc_state ORDER BY msg_id`,
    )
  ).rows;
  expect(rows.map((r) => [r.status, r.error_class, r.attempts])).toEqual([
    ['SUCCEEDED', null, 4],
    ['SUCCEEDED', null, 1],
    ['SUCCEEDED', null, 1],
    ['SUCCEEDED', null, 1],
    ['SUCCEEDED', null, 1],
    ['DEAD', 'EXHAUSTED', 5],
    ['SUCCEEDED', null, 1],
  ]);
  // Seven texts, seven decodes; the seven retries (3 of the head, 4 of the CODEC_ERROR) and the
  // re-reads of the messages behind them were answered from what was learned.
  expect(after.decodes - before.decodes).toBe(texts.length);
  expect(after.reuses - before.reuses).toBeGreaterThanOrEqual(3 + 4);
});
