/**
 * Where the wake-up latency goes (bench/README.md *wakeup*): the wakeup scenario's setup (warm
 * poller and pump under runWorker, LISTEN/NOTIFY, MariaDB mailbox), one message at a time, with
 * the time from the ingress's NOTIFY to each hop: the poller's step starts and ends, the pump's
 * step starts, the processor is called. Prints the median of each, and every query of two
 * messages with its start and end, so a slow round trip shows by name.
 *
 *   npx tsx bench/probes/wake-hops.ts
 */
import { PgDb } from '../../lib/db/pg.ts';
import type { Queryable } from '../../lib/db/db.ts';
import { pollerRole, pumpRole } from '../../lib/jobs/roles.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';
import { MAILBOX_CHANNEL } from '../../lib/pipeline/poller.ts';
import { ProcessorRegistry } from '../../lib/pipeline/processor.ts';
import { defaultRegistry } from '../../lib/app/registry.ts';
import type { RoleSpec } from '../../lib/app/role.ts';
import { benchContext, freshMysql, freshPg } from '../lib/env.ts';
import { sleep } from '../lib/stats.ts';
import { flopText, loadPlan } from '../lib/workload.ts';

const MESSAGES = 200;
const pg = await freshPg();
const my = await freshMysql();
const mailbox = new MysqlMailbox(my.url);
const real = defaultRegistry();
const registry = new ProcessorRegistry();
let processorAt = 0;
registry.resolve = (m) => {
  const proc = real.resolve(m);
  return proc && ((c) => ((processorAt = performance.now()), proc(c)));
};
const ctx = benchContext({ db: pg.db, mailbox, registry, env: { MSGX_MAILBOX_URL: my.url } });
await loadPlan(ctx, mailbox, 2000);

let t0 = 0;
const hops: Record<string, number> = {};
const trace: string[] = [];
const span = (what: string, start: number) => trace.push(`${what} ${(start - t0).toFixed(2)}–${(performance.now() - t0).toFixed(2)} ms`);
for (const name of ['scanIds', 'readTexts', 'readRanges', 'markProcessed'] as const) {
  const f = mailbox[name].bind(mailbox) as (...a: unknown[]) => Promise<unknown>;
  (mailbox as unknown as Record<string, unknown>)[name] = async (...a: unknown[]) => {
    const s = performance.now();
    const r = await f(...a);
    span(`mailbox.${name}`, s);
    return r;
  };
}
const sqlName = (sql: string) => sql.replace(/\s+/g, ' ').slice(0, 50);
const timed = (q: Queryable): Queryable => ({
  query: async (sql, params) => {
    const s = performance.now();
    const r = await q.query(sql, params);
    span(`pg[${sqlName(sql)}]`, s);
    return r as never;
  },
});
const { query, tx } = { query: pg.db.query.bind(pg.db), tx: pg.db.tx.bind(pg.db) };
pg.db.query = timed({ query }).query;
pg.db.tx = async (fn) => {
  const s = performance.now();
  const r = await tx((t) => fn(timed(t)));
  span('pg transaction', s);
  return r;
};

const marked = (role: RoleSpec, name: string): RoleSpec => ({
  ...role,
  step: async (budget) => {
    hops[`${name} starts`] ??= performance.now() - t0;
    const r = await role.step(budget);
    hops[`${name} ends`] ??= performance.now() - t0;
    return r;
  },
});
const stop = new AbortController();
const workers = [marked(pollerRole(ctx), 'poller step'), marked(pumpRole(ctx), 'pump step')].map((role) =>
  runWorker(ctx, { ...role, signal: stop.signal }),
);
const waker = new PgDb(pg.url, { max: 2 });
const samples: Record<string, number>[] = [];
for (let i = 0; i < MESSAGES + 20; i++) {
  const id = await mailbox.insertInbound(flopText(i, 2000));
  await sleep(5);
  for (const k of Object.keys(hops)) delete hops[k];
  trace.length = 0;
  processorAt = 0;
  t0 = performance.now();
  await waker.query(`SELECT pg_notify($1, $2)`, [MAILBOX_CHANNEL, String(id)]);
  await sleep(20);
  if (i === 120) console.log(`message ${i}:\n  ${trace.join('\n  ')}\n  processor ${(processorAt - t0).toFixed(2)} ms`);
  if (i >= 20) samples.push({ ...hops, 'processor called': processorAt - t0 });
}
// A hop is missing from a sample when its step was already running at the NOTIFY.
const median = (k: string) => {
  const v = samples.flatMap((s) => (s[k] === undefined ? [] : [s[k]])).sort((a, b) => a - b);
  return `${v[Math.floor(v.length / 2)]?.toFixed(2)} (${v.length} of ${samples.length})`;
};
console.log('median ms from NOTIFY:');
for (const k of ['poller step starts', 'poller step ends', 'pump step starts', 'processor called'])
  console.log(`  ${k.padEnd(20)} ${median(k)}`);
stop.abort();
await Promise.all(workers);
await waker.close();
await mailbox.close();
await my.drop();
await pg.drop();
process.exit(0);
