/**
 * Where a pump step's time goes (bench/README.md *pump*): the pump scenario's drain (MariaDB
 * mailbox, the day plan of 2,000 flights, N FLOPs each changing its flight) in the pump role's
 * steps, with the mean of each stage of the `pump_step_timing` log line per step, the process's
 * CPU, and the wall time of every statement kind inside the groups' transactions.
 *
 *   [MSGX_GROUP_COMMIT=50] npx tsx bench/probes/pump-steps.ts [messages=5000]
 */
import type { Queryable } from '../../lib/db/db.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';
import { benchContext, freshMysql, freshPg } from '../lib/env.ts';
import { bulkInsertMailbox, flopText, loadPlan, pollAll, pumpAll } from '../lib/workload.ts';

const N = Number(process.argv[2] ?? 5000);
const STAGES = ['read_head_ms', 'prepare_ms', 'commit_ms', 'backfill_ms', 'total_ms'];

const pg = await freshPg();
const my = await freshMysql();
const mailbox = new MysqlMailbox(my.url);
const base = benchContext({ db: pg.db, mailbox, env: { MSGX_GROUP_COMMIT: process.env.MSGX_GROUP_COMMIT ?? '50' } });
await loadPlan(base, mailbox, 2000);
await bulkInsertMailbox(
  { kind: 'mysql', url: my.url },
  Array.from({ length: N }, (_, i) => flopText(i, 2000)),
);
await pollAll(base);

const steps: Record<string, number>[] = [];
const ctx = {
  ...base,
  log: {
    ...base.log,
    info: (line: unknown) => {
      const l = line as Record<string, number> & { message?: string };
      if (l?.message === 'pump_step_timing') steps.push(l);
    },
  } as typeof base.log,
};
const statements = new Map<string, { ms: number; n: number }>();
const tx = pg.db.tx.bind(pg.db);
pg.db.tx = (fn) =>
  tx((t: Queryable) =>
    fn({
      query: async (sql, params) => {
        const s = performance.now();
        try {
          return await t.query(sql, params);
        } finally {
          const k = sql.replace(/\s+/g, ' ').slice(0, 60);
          const e = statements.get(k) ?? { ms: 0, n: 0 };
          e.ms += performance.now() - s;
          e.n++;
          statements.set(k, e);
        }
      },
    }),
  );

const cpu0 = process.cpuUsage();
const t0 = performance.now();
const done = await pumpAll(ctx);
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
const mean = (k: string) => Number((steps.reduce((s, x) => s + (x[k] ?? 0), 0) / steps.length).toFixed(2));
console.log(
  JSON.stringify({
    messages: done,
    msgPerSec: Math.round((done / ms) * 1000),
    groups: steps.length,
    processCpuPct: Math.round(((cpu.user + cpu.system) / 1000 / ms) * 100),
    meanPerGroupMs: Object.fromEntries(STAGES.map((k) => [k, mean(k)])),
  }),
);
console.log('statements in the groups’ transactions (wall ms, count):');
for (const [k, { ms: t, n }] of [...statements].sort((a, b) => b[1].ms - a[1].ms).slice(0, 10))
  console.log(`${t.toFixed(0).padStart(7)} ${String(n).padStart(5)}  ${k}`);
await mailbox.close();
await my.drop();
await pg.drop();
process.exit(0);
