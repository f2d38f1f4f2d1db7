import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { derivedState, finishBatch, openCursor, readBatch, type LogBatch } from '../../lib/outbox/commitLog.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * The outbox read as a commit-ordered log (lib/outbox/commitLog.ts): events come in the batch of
 * their transaction's commit, so a writer that commits late is never passed over, and a rolled
 * back one is never read. The writers use plain INSERTs, as any service would.
 */
let t: TestPg;
beforeAll(async () => {
  t = await freshPg();
});
afterAll(async () => {
  await t?.drop();
});

/** A writer of its own, with its transaction left open. */
async function writer(): Promise<{ insert(key: string): Promise<number>; end(sql: 'COMMIT' | 'ROLLBACK'): Promise<void> }> {
  const c = new pg.Client({ connectionString: t.url });
  c.on('error', () => {}); // a writer left open by a failed test goes with its database
  await c.connect();
  await c.query('BEGIN');
  return {
    async insert(key) {
      const r = await c.query<{ event_id: string }>(
        `INSERT INTO msg_event (target, partition_key, event_type, value, headers) VALUES ('tx:log', $1, 'TX_MESSAGE', $1, '{}') RETURNING event_id`,
        [key],
      );
      return Number(r.rows[0]!.event_id);
    },
    async end(sql) {
      await c.query(sql);
      await c.end();
    },
  };
}

const keys = (b: LogBatch | null) => b?.events.map((e) => e.key) ?? [];

it('a late-committing writer is read in the batch of its commit, a rolled-back one never, and the cursor says SENT', async () => {
  await openCursor(t.db, 'tx:log');
  const late = await writer();
  const gone = await writer();
  const early = await writer();
  const lateId = await late.insert('late'); // lowest event_id, committed last
  await gone.insert('gone');
  const earlyId = await early.insert('early');
  await early.end('COMMIT');
  await gone.end('ROLLBACK');

  const first = await readBatch(t.db, 'tx:log', 100);
  expect(keys(first)).toEqual(['early']);
  expect(await finishBatch(t.db, first!)).toBe(true);
  expect(await derivedState(t.db, earlyId, new Date())).toBe('SENT');
  expect(await derivedState(t.db, lateId, new Date())).toBe(null); // not committed: not there

  await late.end('COMMIT');
  expect(await derivedState(t.db, lateId, new Date())).toBe('PENDING');
  const second = await readBatch(t.db, 'tx:log', 100);
  expect(keys(second)).toEqual(['late']);
  expect(await finishBatch(t.db, second!)).toBe(true);
  expect(await derivedState(t.db, lateId, new Date())).toBe('SENT');
  const after = await readBatch(t.db, 'tx:log', 100);
  expect(keys(after)).toEqual([]);
  expect(await finishBatch(t.db, after!)).toBe(true);
});

it('a batch bigger than the limit is read in pieces, in event_id order, each once', async () => {
  const w = await writer();
  for (const k of ['a', 'b', 'c', 'd', 'e']) await w.insert(k);
  await w.end('COMMIT');
  const seen: (string | null)[] = [];
  for (;;) {
    const b = await readBatch(t.db, 'tx:log', 2);
    seen.push(...keys(b));
    await finishBatch(t.db, b!);
    if (b!.drained && b!.events.length === 0) break;
  }
  expect(seen).toEqual(['a', 'b', 'c', 'd', 'e']);
  expect(keys(await readBatch(t.db, 'tx:log', 2))).toEqual([]);
});
