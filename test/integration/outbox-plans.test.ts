import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Queryable } from '../../lib/db/db.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { dispatchOnce, type DispatchContext } from '../../lib/outbox/dispatcher.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { DISCOVER_SQL, READ_SQL } from '../../lib/outbox/logLease.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import { FakePublisher, memoryLog } from '../helpers/kafka.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * The relay's reads walk what is new, not what was delivered: with 20,000 events delivered (and
 * never updated: the log keeps them as written until retention), finding the next event, opening a
 * batch and listing the open events walk msg_event_writer from the cursor's xmin. A plan that scans
 * msg_event whole, or walks its primary key from the first event, reads every delivered event on
 * the way (15-100 ms per call at 50,000; bench/probes/commit-ack.ts). Judged by the plans PostgreSQL
 * ran (EXPLAIN ANALYZE: what was executed), not by their timing or by the pages they touched, which
 * a long transaction elsewhere in the cluster widens legitimately (the cursor's xmin is older).
 */
let t: TestPg;
const TARGET = 'tx:plans';
const DELIVERED = 20_000;

beforeAll(async () => {
  t = await freshPg();
  for (let i = 0; i < DELIVERED; i += 5_000) {
    await enqueueEvents(
      t.db,
      Array.from({ length: 5_000 }, (_, j) => ({ target: TARGET, key: `k${(i + j) % 50}`, type: 'T', value: `v${i + j}` })),
    );
  }
  const ctx: DispatchContext = { db: t.db, config: loadConfig({}), clock: systemClock, log: memoryLog() };
  const publisher = new FakePublisher();
  while ((await dispatchOnce(ctx, [publisher], { targets: [TARGET], maxBatches: 100 })).sent > 0);
  expect(publisher.delivered).toHaveLength(DELIVERED);
  await t.db.query('VACUUM ANALYZE msg_event');
  await enqueueEvents(t.db, [{ target: TARGET, key: 'k0', type: 'T', value: 'new' }]);
}, 120_000);
afterAll(async () => {
  await t?.drop();
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Actual Loops': number;
  Plans?: PlanNode[];
}
/** The scans of msg_event that ran: how each found its rows. */
function scansOf(node: PlanNode, out: string[] = []): string[] {
  if (node['Relation Name'] === 'msg_event' && node['Actual Loops'] > 0) {
    out.push(`${node['Node Type']} ${node['Index Name'] ?? ''} ${node['Index Cond'] ?? ''}`.trim());
  }
  for (const child of node.Plans ?? []) scansOf(child, out);
  return out;
}
async function scansFor(q: Queryable, sql: string, params: unknown[] = []): Promise<string[]> {
  const r = await q.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
  return scansOf(r.rows[0]!['QUERY PLAN'][0].Plan);
}
/** Scans that read delivered events to find new ones: msg_event whole, or its primary key from the start. */
const unbounded = (scans: string[]) => scans.filter((s) => s.startsWith('Seq Scan') || /msg_event_pkey \(event_id IS NOT NULL\)/.test(s));

it('finding a target with something new walks the rows written since its cursor', async () => {
  const scans = await scansFor(t.db, DISCOVER_SQL);
  expect(unbounded(scans)).toEqual([]);
  expect(scans.some((s) => s.includes('msg_event_writer'))).toBe(true);
});

it('opening the next batch finds its start among the rows written since the cursor', async () => {
  const scans = await t.db
    .tx(async (tx) => {
      const found = await scansFor(tx, READ_SQL, [TARGET, 1000, 'plans-test', new Date(Date.now() + 30_000), new Date()]);
      throw Object.assign(new Error('roll back the lease'), { found });
    })
    .catch((e: { found?: string[] }) => e.found);
  expect(unbounded(scans!)).toEqual([]);
  expect(scans!.some((s) => s.includes('msg_event_writer'))).toBe(true);
});

it('listing the open events (stats, console, health) walks the rows written since the cursor and finds the one new event', async () => {
  const open = await t.db.query<{ value: string }>(
    `SELECT m.value FROM msgx_outbox_open(now()) o JOIN msg_event m ON m.event_id = o.event_id WHERE o.target = $1`,
    [TARGET],
  );
  expect(open.rows.map((r) => r.value)).toEqual(['new']);
  const scans = await scansFor(t.db, 'SELECT count(*) FROM msgx_outbox_open(now())');
  expect(unbounded(scans)).toEqual([]);
  expect(scans.some((s) => s.includes('msg_event_writer'))).toBe(true);
});
