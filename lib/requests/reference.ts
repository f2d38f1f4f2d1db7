import type { Queryable } from '../db/db.ts';
import type { Processor } from '../pipeline/processor.ts';
import { ProtocolError } from '../shared/errors.ts';
import { FALLBACK_RULE } from './match.ts';
import { appendAudit, closeRequest, lockOpenRequest, markSent } from './track.ts';

/**
 * Reference data (docs/flights.md "Reference data"). We ask with RQRF `<RTYP>`; upstream answers with REFD:
 * `<REFD><RTYP>AIRLINE</RTYP><CNT>2</CNT><REC><RKEY>CZ</RKEY>…any fields…</REC>…</REFD>`.
 * An answer replaces the whole set of its rtype: records it lacks are removed, changed ones get a
 * new version, identical ones are left alone. Unsolicited answers are accepted too (pushes); an
 * open RQRF for the same rtype is closed by it.
 */
export const refdProcessor: Processor = async (ctx) => {
  const p = ctx.message.payload;
  if (p.kind !== 'REFD') throw new ProtocolError('REFD message without a REFD body');
  if (!p.RTYP) throw new ProtocolError('REFD has no RTYP');
  if (p.CNT !== undefined && Number(p.CNT) !== p.records.length)
    throw new ProtocolError(`REFD/CNT declares ${p.CNT} records, ${p.records.length} present`);
  const keys = new Set<string>();
  p.records.forEach((r, i) => {
    if (!r.RKEY) throw new ProtocolError(`REFD/REC[${i + 1}] has no RKEY`);
    if (keys.has(r.RKEY)) throw new ProtocolError(`REFD/REC[${i + 1}]: RKEY ${r.RKEY} appears twice`);
    keys.add(r.RKEY);
  });
  const n = await replaceRefSet(
    ctx.tx,
    p.RTYP,
    p.records.map((r) => ({ rkey: r.RKEY!, payload: JSON.stringify(r.nodes) })),
    ctx.msgId,
    ctx.now,
  );
  const open = await lockOpenRequest(ctx.tx, 'RQRF');
  const answerAt = ctx.message.sentAt;
  // The fallback's time rule, as for day plans (lib/requests/match.ts): an answer dated before our
  // request (whole seconds, DTTM's unit) or undated answers an earlier generation or nothing. Its
  // data is kept (pushes are accepted); only the request stays open, and its audit says why.
  const older = open?.sent_at && (!answerAt || answerAt.getTime() < Math.floor(open.sent_at.getTime() / 1000) * 1000);
  if (open && open.scope === p.RTYP && older) {
    const reason = answerAt ? 'answer-older-than-request' : 'answer-without-dttm';
    await appendAudit(ctx.tx, open.id, { what: 'answer-not-matched', reason, msgId: ctx.msgId }, ctx.now);
  } else if (open && open.scope === p.RTYP && open.sent_at) {
    // Matched by kind and rtype only (a REFD carries no echo), so the audit says so. A request
    // whose write was never confirmed is confirmed by this answer: upstream read it, or pushed
    // the same set meanwhile — either way the data it asked for has arrived.
    if (open.status === 'REGISTERED') {
      await markSent(ctx.tx, open.id, open.outbound_id, open.sent_at);
      await appendAudit(ctx.tx, open.id, { what: 'confirmed-by-answer', msgId: ctx.msgId }, ctx.now);
    }
    await appendAudit(
      ctx.tx,
      open.id,
      {
        what: 'answer-matched',
        method: 'fallback',
        rule: `${FALLBACK_RULE}, same RTYP`,
        msgId: ctx.msgId,
        answerAt: answerAt!.toISOString(),
      },
      ctx.now,
    );
    await closeRequest(ctx.tx, open.id, 'DONE', 'answered', ctx.now, ctx.msgId);
  }
  return { status: 'SUCCEEDED', note: `rtype=${p.RTYP} upserted=${n.upserted} removed=${n.removed}` };
};

/** One statement: upsert what changed (version + 1), delete what the answer no longer lists. */
export async function replaceRefSet(
  q: Queryable,
  rtype: string,
  records: { rkey: string; payload: string }[],
  msgId: number,
  now: Date,
): Promise<{ upserted: number; removed: number }> {
  const r = await q.query<{ upserted: number; removed: number }>(
    `WITH incoming AS (SELECT * FROM unnest($2::text[], $3::jsonb[]) AS t(rkey, payload)),
     up AS (
       INSERT INTO ref_master (rtype, rkey, payload, version, msg_id, updated_at)
       SELECT $1, rkey, payload, 1, $4, $5 FROM incoming
       ON CONFLICT (rtype, rkey) DO UPDATE
         SET payload = EXCLUDED.payload, version = ref_master.version + 1, msg_id = EXCLUDED.msg_id, updated_at = EXCLUDED.updated_at
         WHERE ref_master.payload IS DISTINCT FROM EXCLUDED.payload
       RETURNING 1),
     del AS (DELETE FROM ref_master m WHERE m.rtype = $1 AND m.rkey NOT IN (SELECT rkey FROM incoming) RETURNING 1)
     SELECT (SELECT count(*) FROM up)::int AS upserted, (SELECT count(*) FROM del)::int AS removed`,
    [rtype, records.map((r) => r.rkey), records.map((r) => r.payload), msgId, now],
  );
  return r.rows[0]!;
}

export async function readRefSet(q: Queryable, rtype: string): Promise<{ rkey: string; payload: unknown; version: number }[]> {
  const r = await q.query<{ rkey: string; payload: unknown; version: number }>(
    `SELECT rkey, payload, version FROM ref_master WHERE rtype = $1 ORDER BY rkey`,
    [rtype],
  );
  return r.rows;
}
