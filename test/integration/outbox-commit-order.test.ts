import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { dispatchOnce, type DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { pendingByTarget } from '../../lib/outbox/queries.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { FakePublisher, memoryLog } from '../helpers/kafka.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * The outbox read as a commit-ordered log, through the dispatcher on real PostgreSQL: events come
 * in the batch of their transaction's commit, so a writer that commits late is never passed over,
 * and a rolled back one is never read. The writers use plain INSERTs, as any service would; what
 * went out is judged by what the publisher received, what is owed by the stats view.
 */
let t: TestPg;
beforeAll(async () => {
  t = await freshPg();
});
afterAll(async () => {
  await t?.drop();
});

const TARGET = 'tx:log';

function relay(batchSize: number) {
  const clock = new FakeClock('2026-12-03T00:00:00Z');
  const config = loadConfig({ MSGX_DELIVERY_BATCH_SIZE: String(batchSize) });
  const ctx: DispatchContext = { db: t.db, config, clock, log: memoryLog() };
  const publisher = new FakePublisher();
  return {
    publisher,
    /** One round of one batch; the keys the publisher received in that round. */
    async round(): Promise<(string | null)[]> {
      const before = publisher.delivered.length;
      await dispatchOnce(ctx, [publisher], { targets: [TARGET], maxBatches: 1 });
      return publisher.delivered.slice(before).map((r) => r.key);
    },
    owed: async () => (await pendingByTarget(t.db, clock.now())).find((b) => b.target === TARGET)?.pending ?? 0,
  };
}

/** A writer of its own, with its transaction left open. */
async function writer(): Promise<{ insert(key: string): Promise<void>; end(sql: 'COMMIT' | 'ROLLBACK'): Promise<void> }> {
  const c = new pg.Client({ connectionString: t.url });
  c.on('error', () => {}); // a writer left open by a failed test goes with its database
  await c.connect();
  await c.query('BEGIN');
  return {
    async insert(key) {
      await c.query(`INSERT INTO msg_event (target, partition_key, event_type, value, headers) VALUES ($1, $2, 'TX_MESSAGE', $2, '{}')`, [
        TARGET,
        key,
      ]);
    },
    async end(sql) {
      await c.query(sql);
      await c.end();
    },
  };
}

it('a late-committing writer is delivered in the round after its commit, a rolled-back one never, and nothing stays owed', async () => {
  const r = relay(100);
  const late = await writer();
  const gone = await writer();
  const early = await writer();
  await late.insert('late'); // lowest event_id, committed last
  await gone.insert('gone');
  await early.insert('early');
  await early.end('COMMIT');
  await gone.end('ROLLBACK');

  expect(await r.round()).toEqual(['early']);
  expect(await r.owed()).toBe(0); // the late writer's event is not committed: not there

  await late.end('COMMIT');
  expect(await r.owed()).toBe(1);
  expect(await r.round()).toEqual(['late']);
  expect(await r.owed()).toBe(0);
  expect(await r.round()).toEqual([]);
  expect(r.publisher.delivered.map((d) => d.key)).toEqual(['early', 'late']);
});

it('a batch bigger than the batch size goes out in pieces, in event_id order, each once', async () => {
  const r = relay(2);
  const w = await writer();
  for (const k of ['a', 'b', 'c', 'd', 'e']) await w.insert(k);
  await w.end('COMMIT');
  const rounds: (string | null)[][] = [];
  for (let i = 0; i < 10 && (await r.owed()) > 0; i++) rounds.push(await r.round());
  expect(rounds.flat()).toEqual(['a', 'b', 'c', 'd', 'e']);
  expect(rounds.every((keys) => keys.length <= 2)).toBe(true);
  expect(await r.round()).toEqual([]);
});
