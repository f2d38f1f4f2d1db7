import type { Queryable } from '../../lib/db/db.ts';
import { child } from '../../lib/codec/xml.ts';
import { ProcessorRegistry } from '../../lib/pipeline/processor.ts';
import { InfraError, ProtocolError, UnsupportedError } from '../../lib/shared/errors.ts';

/**
 * Processors for pipeline tests: type TEST writes one row per applied message into test_effect,
 * in the pump's transaction, so "applied exactly once" is a plain count. The body decides the
 * behaviour: <FAIL>INFRA|PROTOCOL|UNSUPPORTED</FAIL> throws that class; <FAILTIMES>n</FAILTIMES>
 * fails the first n attempts with INFRA; <SKIP>reason</SKIP> answers SKIPPED.
 */
export async function createEffectTables(q: Queryable): Promise<void> {
  await q.query(`CREATE TABLE IF NOT EXISTS test_effect (msg_id bigint NOT NULL, seqn text NOT NULL, applied_at timestamptz NOT NULL)`);
}

export function testRegistry(): ProcessorRegistry {
  return new ProcessorRegistry().register('TEST', async ({ tx, msgId, message, now }) => {
    const field = (name: string) => {
      const v = child(message.body, name);
      return typeof v === 'string' ? v : undefined;
    };
    const body = { FAIL: field('FAIL'), FAILTIMES: field('FAILTIMES'), SKIP: field('SKIP') };
    // The write comes before any failure, so a failure must roll it back to the savepoint.
    await tx.query(`INSERT INTO test_effect (msg_id, seqn, applied_at) VALUES ($1, $2, $3)`, [msgId, message.meta.SEQN, now]);
    if (body.FAIL === 'INFRA') throw new InfraError('test infra failure');
    if (body.FAIL === 'PROTOCOL') throw new ProtocolError('test protocol violation');
    if (body.FAIL === 'UNSUPPORTED') throw new UnsupportedError('test unsupported');
    if (body.FAILTIMES) {
      // proc_state.attempts counts the attempts finished before this one.
      const a = await tx.query<{ attempts: number }>(`SELECT attempts FROM proc_state WHERE msg_id = $1`, [msgId]);
      if (a.rows[0]!.attempts < Number(body.FAILTIMES)) throw new InfraError(`planned failure ${a.rows[0]!.attempts + 1}`);
    }
    if (body.SKIP) return { status: 'SKIPPED', note: body.SKIP };
    return { status: 'SUCCEEDED' };
  });
}
