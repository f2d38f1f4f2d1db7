/**
 * The pump's CPU per message, less sensitive to a busy machine than msg/s (bench/README.md
 * *pump*, *e2e*): the pump scenario's drain with the mailbox as tables in PostgreSQL (a fresh
 * database, the day plan of 2,000 flights, N FLOPs each changing its flight), timed from the
 * first pumpOnce until idle. Prints msg/s, the on-CPU time of every PostgreSQL backend of that
 * database (/proc/<pid>/schedstat) and of this process per message. Compare two trees by
 * alternating runs of this script in the same minutes.
 *
 *   npx tsx bench/probes/pump-cpu.ts [messages=5000]
 */
import { readFileSync } from 'node:fs';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { benchContext, freshPg } from '../lib/env.ts';
import { bulkInsertMailbox, flopText, loadPlan, pollAll, pumpAll } from '../lib/workload.ts';

const N = Number(process.argv[2] ?? 5000);
const FLIGHTS = 2000;

/** Nanoseconds the process has been on a CPU; null once it has exited. */
const onCpuNs = (pid: number): number | null => {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return null;
  }
};

const pg = await freshPg();
try {
  const mailbox = new PgMailbox(pg.db);
  await mailbox.ensureTables();
  const ctx = benchContext({ db: pg.db, mailbox });
  await loadPlan(ctx, mailbox, FLIGHTS);
  await bulkInsertMailbox(
    { kind: 'pg', db: pg.db },
    Array.from({ length: N }, (_, i) => flopText(i, FLIGHTS)),
  );
  const enqueued = await pollAll(ctx);
  if (enqueued !== N) throw new Error(`poller enqueued ${enqueued}, expected ${N}`);
  const db = new URL(pg.url).pathname.slice(1);
  const backends = async () =>
    (await pg.db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [db])).rows.map((r) => r.pid);
  // The pool closes connections idle for 10 s: a backend gone by the end counts what it had at the
  // start (it was idle), one opened during the drain counts from zero.
  const pg0 = new Map((await backends()).map((pid) => [pid, onCpuNs(pid) ?? 0]));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const done = await pumpAll(ctx);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const after = await backends();
  let pgNs = 0;
  for (const pid of new Set([...pg0.keys(), ...after])) pgNs += (onCpuNs(pid) ?? pg0.get(pid) ?? 0) - (pg0.get(pid) ?? 0);
  const bytes = await pg.db.query<{ schd: number; msg: number }>(
    `SELECT coalesce(avg(length(value)) FILTER (WHERE target = 'schd'), 0)::int AS schd,
            coalesce(avg(length(value)) FILTER (WHERE target = 'msg'), 0)::int AS msg FROM msg_event`,
  );
  await mailbox.close();
  console.log(
    JSON.stringify({
      messages: done,
      msgPerSec: Math.round((done / ms) * 1000),
      pgCpuUsPerMsg: Number((pgNs / 1000 / done).toFixed(1)),
      processCpuUsPerMsg: Number(((cpu.user + cpu.system) / done).toFixed(1)),
      valueBytes: bytes.rows[0],
    }),
  );
} finally {
  await pg.drop();
}
