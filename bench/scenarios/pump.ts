import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { benchContext, freshMysql, freshPg } from '../lib/env.ts';
import { pgbenchCommitRate, pgSettings } from '../lib/pgbench.ts';
import { observe, topWaits } from '../lib/observe.ts';
import { type Progress, progress } from '../lib/progress.ts';
import { figure, ratios, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { bulkInsertMailbox, flopText, loadPlan, pollAll, pumpAll } from '../lib/workload.ts';

export const FLIGHTS = 2000;

export interface PumpRun {
  rate: number;
  cpuPct: number;
  waits: Record<string, number>;
  ms: number;
  events: number;
}

/**
 * One timed drain: fresh PG (migrated) + mailbox (fresh MariaDB database, or tables in the PG
 * database), the day plan, `count` FLOPs inserted and enqueued by pollOnce, then pumpOnce until
 * idle (group commit, savepoints, events, backfill included) with the real registry.
 */
export async function timedPump(kind: 'mysql' | 'pg', count: number, p: Progress, label: string): Promise<PumpRun> {
  const pg = await freshPg();
  const my = kind === 'mysql' ? await freshMysql() : null;
  try {
    const mailbox = my ? new MysqlMailbox(my.url) : new PgMailbox(pg.db);
    if (!my) await (mailbox as PgMailbox).ensureTables();
    const ctx = benchContext({ db: pg.db, mailbox, env: my ? { MSGX_MAILBOX_URL: my.url } : {} });
    await loadPlan(ctx, mailbox, FLIGHTS);
    const texts = Array.from({ length: count }, (_, i) => flopText(i, FLIGHTS));
    await bulkInsertMailbox(my ? { kind: 'mysql', url: my.url } : { kind: 'pg', db: pg.db }, texts);
    const enq = await pollAll(ctx);
    if (enq !== count) throw new Error(`poller enqueued ${enq}, expected ${count}`);
    p.step(label, `${count} FLOPs enqueued (mailbox ${kind}); draining`);
    const tick = p.counter(label, count, 'msgs');
    const obs = await observe(pg.url);
    const t0 = performance.now();
    const done = await pumpAll(ctx, tick);
    const ms = performance.now() - t0;
    const seen = await obs.stop();
    tick(done, true);
    // Check the work really happened: every FLOP succeeded, the mailbox is back-filled.
    const ok = await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM proc_state WHERE status = 'SUCCEEDED' AND note IS NULL`);
    if (ok.rows[0]!.n < count) throw new Error(`only ${ok.rows[0]!.n} of ${count} FLOPs changed their flight`);
    const left = await mailbox.filterUnprocessed(Array.from({ length: count + 1 }, (_, i) => i + 1));
    if (left.length) throw new Error(`${left.length} mailbox rows not back-filled`);
    const ev = await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM msg_event`);
    await mailbox.close();
    return { rate: (done / ms) * 1000, ms, events: ev.rows[0]!.n, cpuPct: seen.cpuPct, waits: seen.waits };
  } finally {
    await my?.drop();
    await pg.drop();
  }
}

export async function pumpScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('pump');
  const count = o.quick ? 2000 : 10_000;
  const pgbenchSecs = o.quick ? 3 : 10;
  const bench: number[] = [];
  const my: number[] = [];
  const pgm: number[] = [];
  const meta: Record<string, unknown> = { messages: count, flights: FLIGHTS, pgbenchSeconds: pgbenchSecs, settings: await pgSettings() };
  const eventsPerRun: number[] = [];
  const cpu: number[] = [];
  const waits: Record<string, number> = {};
  for (let r = 0; r < o.runs; r++) {
    const label = `${r + 1}/${o.runs}`;
    p.step(label, `pgbench -c1 -T${pgbenchSecs} (BEGIN; INSERT; UPDATE; COMMIT)`);
    bench.push(await pgbenchCommitRate(pgbenchSecs));
    p.step(label, `pgbench ${bench.at(-1)!.toFixed(0)} tx/s`);
    const a = await timedPump('mysql', count, p, label);
    my.push(a.rate);
    eventsPerRun.push(a.events);
    cpu.push(a.cpuPct);
    for (const [k, v] of Object.entries(a.waits)) waits[k] = (waits[k] ?? 0) + v;
    p.step(label, `msgx pump, MariaDB mailbox: ${a.rate.toFixed(0)} msgs/s; pump CPU ${a.cpuPct}%; PG sessions: ${topWaits(a.waits)}`);
    const b = await timedPump('pg', count, p, label);
    pgm.push(b.rate);
    p.step(label, `msgx pump, PG mailbox: ${b.rate.toFixed(0)} msgs/s`);
  }
  meta.eventsPerRun = eventsPerRun;
  meta.pgWaitSamples = waits;
  return {
    scenario: 'pump',
    title: `FIFO pump: ${count.toLocaleString('en-US')} FLOPs end to end`,
    figures: [
      figure('pump.pgbench', 'pgbench single-client commit rate (2-stmt tx)', 'tx/s', bench, { headline: true }),
      figure('pump.mysql', 'msgx pump, mailbox MariaDB', 'msg/s', my, { headline: true }),
      figure('pump.pg', 'msgx pump, mailbox in PostgreSQL', 'msg/s', pgm, { headline: true }),
      figure('pump.cpu', 'pump process CPU while draining (MariaDB mailbox)', '%', cpu, { better: 'lower' }),
      figure('pump.mysql.vs.pgbench', 'msgx pump (MariaDB) / pgbench commit rate', 'x', ratios(my, bench), {
        target: { op: '>=', value: 3 },
        headline: true,
      }),
      figure('pump.pg.vs.pgbench', 'msgx pump (PG mailbox) / pgbench commit rate', 'x', ratios(pgm, bench), {
        target: { op: '>=', value: 3 },
      }),
    ],
    notes: [
      `while the pump drains (MariaDB mailbox), PG session samples: ${topWaits(waits)}; pump process CPU ${cpu.join('/')}% of one core.`,
    ],
    meta,
  };
}
