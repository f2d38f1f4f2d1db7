import pg from 'pg';
import { run as runGraphile, runMigrations } from 'graphile-worker';
import PgBoss from 'pg-boss';
import { decode } from '../../lib/codec/decode.ts';
import type { Config } from '../../lib/config/config.ts';
import { PgDb } from '../../lib/db/pg.ts';
import { flopProcessor } from '../../lib/flights/flop.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';
import { benchContext, freshMysql, freshPg } from '../lib/env.ts';
import { type Progress, progress } from '../lib/progress.ts';
import { figure, ratios, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { bulkInsertMailbox, flopText, loadPlan } from '../lib/workload.ts';
import { FLIGHTS, timedPump } from './pump.ts';

/**
 * The same work per job as one pump message, through the same code: read the text from the
 * MariaDB mailbox, decode with lib/codec/decode.ts, apply the FLOP processor in its own
 * transaction, back-fill the mailbox row. The queue does its own bookkeeping (its job rows).
 */
async function doJob(db: PgDb, mailbox: MysqlMailbox, config: Config, id: number): Promise<void> {
  const text = (await mailbox.readTexts([id])).get(id);
  if (typeof text !== 'string') throw new Error(`mailbox row ${id} ${text === undefined ? 'missing' : text.undecodable}`);
  const message = decode(text, { timezone: config.timezone });
  const now = new Date();
  const r = await db.tx((tx) => flopProcessor({ tx, msgId: id, message, now, config }));
  if (r.status !== 'SUCCEEDED' || r.note) throw new Error(`job ${id}: ${r.status} ${r.note}`);
  await mailbox.markProcessed([{ id, status: 'SUCCEEDED', note: null, processedAt: now }]);
}

/** Fresh PG + MariaDB with the plan applied and `count` FLOPs in the mailbox; returns their IDs. */
async function setup(count: number) {
  const pgdb = await freshPg();
  const my = await freshMysql();
  const mailbox = new MysqlMailbox(my.url);
  const ctx = benchContext({ db: pgdb.db, mailbox, env: { MSGX_MAILBOX_URL: my.url } });
  await loadPlan(ctx, mailbox, FLIGHTS);
  await bulkInsertMailbox(
    { kind: 'mysql', url: my.url },
    Array.from({ length: count }, (_, i) => flopText(i, FLIGHTS)),
  );
  const ids = Array.from({ length: count }, (_, i) => i + 2); // ID 1 is the plan
  return {
    pgdb,
    mailbox,
    config: ctx.config,
    ids,
    async check() {
      const left = await mailbox.filterUnprocessed(ids);
      if (left.length) throw new Error(`${left.length} mailbox rows not processed`);
    },
    async close() {
      await mailbox.close();
      await my.drop();
      await pgdb.drop();
    },
  };
}

async function graphileRun(count: number, p: Progress, label: string): Promise<number> {
  const s = await setup(count);
  try {
    await runMigrations({ connectionString: s.pgdb.url, logger: quietLogger() });
    const c = new pg.Client({ connectionString: s.pgdb.url });
    await c.connect();
    for (let i = 0; i < s.ids.length; i += 1000)
      await c.query(
        `SELECT graphile_worker.add_job('flop', json_build_object('id', id), queue_name := 'flights') FROM unnest($1::int[]) WITH ORDINALITY AS t(id, o) ORDER BY o`,
        [s.ids.slice(i, i + 1000)],
      );
    await c.end();
    p.step(label, `graphile-worker: ${count} jobs queued (queue 'flights', concurrency 1)`);
    const jobDb = new PgDb(s.pgdb.url, { max: 2 });
    let done = 0;
    let lastAt = 0;
    const tick = p.counter(label, count, 'jobs (graphile-worker)');
    let finish!: () => void;
    const finished = new Promise<void>((r) => (finish = r));
    const t0 = performance.now();
    const runner = await runGraphile({
      connectionString: s.pgdb.url,
      concurrency: 1,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: quietLogger(),
      taskList: {
        flop: async (payload) => {
          await doJob(jobDb, s.mailbox, s.config, (payload as { id: number }).id);
          done++;
          tick(done);
          if (done === count) {
            lastAt = performance.now();
            finish();
          }
        },
      },
    });
    await finished;
    const ms = lastAt - t0;
    await runner.stop();
    await jobDb.close();
    await s.check();
    return (count / ms) * 1000;
  } finally {
    await s.close();
  }
}

async function pgBossRun(count: number, p: Progress, label: string): Promise<number> {
  const s = await setup(count);
  const boss = new PgBoss({ connectionString: s.pgdb.url, max: 3, supervise: false, schedule: false, migrate: true });
  boss.on('error', () => {});
  try {
    await boss.start();
    await boss.createQueue('flights', { name: 'flights', policy: 'singleton' });
    // IDs that sort like the mailbox order: jobs inserted in one statement share created_on.
    const uuid = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
    for (let i = 0; i < s.ids.length; i += 1000)
      await boss.insert(s.ids.slice(i, i + 1000).map((id) => ({ id: uuid(id), name: 'flights', data: { id } })));
    p.step(label, `pg-boss: ${count} jobs queued (singleton queue, fetch/complete loop)`);
    const tick = p.counter(label, count, 'jobs (pg-boss)');
    const jobDb = new PgDb(s.pgdb.url, { max: 2 });
    let done = 0;
    let expect = 2;
    const t0 = performance.now();
    for (;;) {
      const jobs = await boss.fetch<{ id: number }>('flights', { batchSize: 1 });
      const job = jobs?.[0];
      if (!job) break;
      if (job.data.id !== expect) throw new Error(`pg-boss handed out ${job.data.id}, expected ${expect} (FIFO broken)`);
      expect++;
      await doJob(jobDb, s.mailbox, s.config, job.data.id);
      await boss.complete('flights', job.id);
      done++;
      tick(done);
    }
    const ms = performance.now() - t0;
    await jobDb.close();
    if (done !== count) throw new Error(`pg-boss processed ${done} of ${count}`);
    await s.check();
    return (count / ms) * 1000;
  } finally {
    await boss.stop({ graceful: false, wait: true }).catch(() => {});
    await s.close();
  }
}

function quietLogger() {
  // graphile-worker's Logger: a factory of scoped log functions; keep errors only.
  return new (class {
    scope() {
      return this;
    }
    error(m: string) {
      process.stderr.write(`graphile-worker: ${m}\n`);
    }
    warn() {}
    info() {}
    debug() {}
  })() as never;
}

export async function peersScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('peers');
  const count = o.quick ? 300 : 1000;
  const gw: number[] = [];
  const boss: number[] = [];
  const msgx: number[] = [];
  const fromPump = o.earlier.get('pump.mysql');
  for (let r = 0; r < o.runs; r++) {
    const label = `${r + 1}/${o.runs}`;
    gw.push(await graphileRun(count, p, label));
    p.step(label, `graphile-worker ${gw.at(-1)!.toFixed(0)} jobs/s`);
    boss.push(await pgBossRun(count, p, label));
    p.step(label, `pg-boss ${boss.at(-1)!.toFixed(0)} jobs/s`);
    if (!fromPump) {
      msgx.push((await timedPump('mysql', count, p, label)).rate);
      p.step(label, `msgx pump ${msgx.at(-1)!.toFixed(0)} msgs/s`);
    }
  }
  const mine = fromPump?.runs ?? msgx;
  return {
    scenario: 'peers',
    title: 'Serial FIFO peers doing the same work per job',
    figures: [
      figure('peers.graphile', 'graphile-worker 0.16.6, named queue (serial)', 'msg/s', gw, { headline: true }),
      figure('peers.pgboss', 'pg-boss 10, singleton queue, fetch/complete loop', 'msg/s', boss, { headline: true }),
      figure('peers.msgx.vs.graphile', 'msgx pump (MariaDB) / graphile-worker', 'x', ratios(mine, gw), {
        target: { op: '>=', value: 3 },
        headline: true,
      }),
      figure('peers.msgx.vs.pgboss', 'msgx pump (MariaDB) / pg-boss', 'x', ratios(mine, boss)),
    ],
    notes: [
      `peers drain ${count.toLocaleString('en-US')} jobs per run; the msgx figure is ${fromPump ? "the pump scenario's (same invocation, run i paired with run i)" : 'measured here'}.`,
    ],
    meta: { jobs: count, msgxFrom: fromPump ? 'pump.mysql' : 'measured in peers' },
  };
}
