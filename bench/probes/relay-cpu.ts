/**
 * The relay's CPU per event, less sensitive to a busy machine than events/s (bench/README.md
 * *relay*): N events queued in a fresh database, then the dispatcher role's step until all are
 * SENT, with an instant in-process publisher, so only the relay's own work counts. Prints the
 * PostgreSQL CPU (on-CPU time of the pool's backends, /proc/<pid>/schedstat) and the process's
 * CPU per event. Compare two trees by alternating runs of this script in the same minutes.
 *
 *   npx tsx bench/probes/relay-cpu.ts [events=20000] [analyze] [dead=0]
 *
 * `analyze` runs ANALYZE after queueing, as autovacuum soon does on a live table: the planner then
 * knows the window's size, which is what the page read's plan must survive. `dead` exceptions of the
 * target (events that died earlier, kept until retention) are there before the run.
 */
import { readFileSync } from 'node:fs';
import { dispatcherRole } from '../../lib/jobs/dispatcherRole.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { eventOf } from '../scenarios/relay.ts';
import type { OutRecord, Publisher, PublishResult } from '../../lib/outbox/types.ts';
import { benchContext, freshPg } from '../lib/env.ts';

const N = Number(process.argv[2] ?? 20_000);

let offset = 0;
const instant: Publisher = {
  name: 'kafka',
  async publish(records: OutRecord[]): Promise<PublishResult[]> {
    return records.map((_, i) => ({ ok: true as const, partition: i % 6, offset: offset++ }));
  },
  async close() {},
};

/** Nanoseconds the process has been on a CPU. */
const onCpuNs = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);

const pg = await freshPg();
try {
  const ctx = benchContext({ db: pg.db, mailbox: new PgMailbox(pg.db) });
  const events = Array.from({ length: N }, (_, i) => eventOf(i));
  for (let i = 0; i < N; i += 5000) await ctx.db.tx((tx) => enqueueEvents(tx, events.slice(i, i + 5000)));
  const dead = Number(process.argv[4] ?? 0);
  if (dead > 0)
    await ctx.db.query(
      `INSERT INTO outbox_exception (target, event_id, dead, at_head) SELECT 'msg', -g, true, false FROM generate_series(1, $1::int) g`,
      [dead],
    );
  if (process.argv[3] === 'analyze') await ctx.db.query('ANALYZE');
  const role = dispatcherRole(ctx, [instant]);
  const open = async () => (await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM msgx_outbox_open(now())`)).rows[0]!.n;
  // The first step opens the pool's connections; it is not counted.
  await role.step({ remainingMs: Number.POSITIVE_INFINITY });
  const left = await open();
  const db = new URL(pg.url).pathname.slice(1);
  const backends = async () =>
    (await ctx.db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [db])).rows.map((r) => r.pid);
  const pids = await backends();
  const pg0 = pids.map(onCpuNs);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (;;) {
    const s = await role.step({ remainingMs: Number.POSITIVE_INFINITY });
    if (!s.busy && (await open()) === 0) break;
  }
  const ms = performance.now() - t0;
  const pgNs = pids.reduce((sum, pid, i) => sum + onCpuNs(pid) - pg0[i]!, 0);
  const cpu = process.cpuUsage(cpu0);
  const samePool = (await backends()).length === pids.length;
  console.log(
    JSON.stringify({
      events: left,
      eventsPerSec: Math.round((left / ms) * 1000),
      pgCpuUsPerEvent: Number((pgNs / 1000 / left).toFixed(1)),
      processCpuUsPerEvent: Number(((cpu.user + cpu.system) / left).toFixed(1)),
      samePool,
    }),
  );
} finally {
  await pg.drop();
}
