import mysql from 'mysql2/promise';
import type { Db } from '../../lib/db/db.ts';
import type { Mailbox } from '../../lib/mailbox/mailbox.ts';
import { pollOnce } from '../../lib/pipeline/poller.ts';
import { GROUPS_PER_STEP, pumpOnce } from '../../lib/pipeline/pump.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { flight, flop, schd } from '../../test/fixtures/messages/build.ts';

/**
 * The FIFO workload: a SCHD/DNLD day plan of `flights` flights, then `count` FLOP/ETOT messages,
 * one flight each (round robin over the plan), each with a new ETOT so every one changes its
 * flight (state_version bump, msgx.msg + msgx.schd events): the full write path every time.
 */
export const DAY = '20261129';
export const flidOf = (i: number, flights: number) => String(100000 + (i % flights));

export function planText(flights: number): string {
  const fl = Array.from({ length: flights }, (_, i) =>
    flight({ FLID: flidOf(i, flights), OPDY: DAY, AWCD: 'CZ', FLNO: String(3000 + i), SOBT: '20261129101500', STAT: 'SCH' }),
  );
  return schd('DNLD', { seqn: 1, dttm: '20261129050000', opdy: DAY, flights: fl });
}

/** ETOT values 06:00:00 + i seconds: unique per message, valid wire time. */
function etot(i: number): string {
  const s = 6 * 3600 + i;
  const hh = String(Math.floor(s / 3600) % 24).padStart(2, '0');
  const mm = String(Math.floor(s / 60) % 60).padStart(2, '0');
  const ss = String(s % 60).padStart(2, '0');
  return `${DAY}${hh}${mm}${ss}`;
}

export function flopText(i: number, flights: number): string {
  return flop('ETOT', { seqn: 10_000 + i, dttm: '20261129060000' }, flight({ FLID: flidOf(i, flights), ETOT: etot(i) }));
}

/** Bulk insert of mailbox rows the way another system would (not timed): returns the IDs in order. */
export async function bulkInsertMailbox(target: { kind: 'mysql'; url: string } | { kind: 'pg'; db: Db }, texts: string[]): Promise<void> {
  const CHUNK = 1000;
  if (target.kind === 'mysql') {
    const conn = await mysql.createConnection({ uri: target.url });
    try {
      for (let i = 0; i < texts.length; i += CHUNK)
        await conn.query('INSERT INTO CMINMSGS (MSG_TEXT) VALUES ?', [texts.slice(i, i + CHUNK).map((t) => [t])]);
    } finally {
      await conn.end();
    }
  } else {
    for (let i = 0; i < texts.length; i += CHUNK)
      await target.db.query(`INSERT INTO "CMINMSGS" ("MSG_TEXT") SELECT unnest($1::text[])`, [texts.slice(i, i + CHUNK)]);
  }
}

/** pollOnce until the mailbox has nothing new. */
export async function pollAll(ctx: AppContext, onProgress?: (n: number) => void): Promise<number> {
  let total = 0;
  for (;;) {
    const r = await pollOnce(ctx);
    total += r.enqueued;
    onProgress?.(total);
    if (!r.more) return total;
  }
}

/** pumpOnce until idle, in steps like the pump role's; returns the messages processed. Throws if the head gets stuck. */
export async function pumpAll(ctx: AppContext, onProgress?: (n: number) => void): Promise<number> {
  let total = 0;
  for (;;) {
    const r = await pumpOnce(ctx, { maxGroups: GROUPS_PER_STEP });
    if (r.kind === 'idle') return total;
    if (r.kind !== 'processed') throw new Error(`pump stopped: ${JSON.stringify(r)}`);
    if (r.stopped) throw new Error(`pump head failed after ${total} messages`);
    total += r.count;
    onProgress?.(total);
  }
}

/** Plan in the mailbox, polled and pumped (not timed). */
export async function loadPlan(ctx: AppContext, mailbox: Mailbox, flights: number): Promise<void> {
  await mailbox.insertInbound(planText(flights));
  await pollAll(ctx);
  await pumpAll(ctx);
  const r = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM flight_schd`);
  if (r.rows[0]!.n !== flights) throw new Error(`plan created ${r.rows[0]!.n} flights, expected ${flights}`);
}
