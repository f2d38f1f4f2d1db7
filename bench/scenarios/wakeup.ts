import { PgDb } from '../../lib/db/pg.ts';
import { pollerRole, pumpRole } from '../../lib/jobs/roles.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';
import { MAILBOX_CHANNEL } from '../../lib/pipeline/poller.ts';
import { ProcessorRegistry } from '../../lib/pipeline/processor.ts';
import { defaultRegistry } from '../../lib/app/registry.ts';
import { benchContext, freshMysql, freshPg } from '../lib/env.ts';
import { progress } from '../lib/progress.ts';
import { figure, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { latency, sleep } from '../lib/stats.ts';
import { flopText, loadPlan } from '../lib/workload.ts';
import { FLIGHTS } from './pump.ts';

/**
 * Wake-up → processing start on a warm pipeline: runWorker(pollerRole) and runWorker(pumpRole)
 * idle (poll interval 1 s) and are woken by LISTEN/NOTIFY. Each message is stored in the MariaDB
 * mailbox first, then t0 is taken just before the ingress's wake-up (`pg_notify('msgx_mailbox')`)
 * is sent; the poller reads the new ID, enqueues it and moves the frontier (docs/ordering.md),
 * which wakes the pump; the end is the moment the real FLOP processor is called (a wrapper around
 * the registry). Same process, same performance.now() clock; the waker has its own pool.
 */
export async function wakeupScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('wakeup');
  const count = o.quick ? 100 : 500;
  const spacingMs = 20;
  const p50: number[] = [];
  const p99: number[] = [];
  const max: number[] = [];
  for (let r = 0; r < o.runs; r++) {
    const label = `${r + 1}/${o.runs}`;
    const pg = await freshPg();
    const my = await freshMysql();
    const mailbox = new MysqlMailbox(my.url);
    const real = defaultRegistry();
    const starts = new Map<number, number>();
    const registry = new ProcessorRegistry();
    registry.resolve = (m) => {
      const proc = real.resolve(m);
      return proc && ((c) => (starts.set(c.msgId, performance.now()), proc(c)));
    };
    const ctx = benchContext({ db: pg.db, mailbox, registry, env: { MSGX_MAILBOX_URL: my.url } });
    const stop = new AbortController();
    try {
      await loadPlan(ctx, mailbox, FLIGHTS);
      const workers = [pollerRole(ctx), pumpRole(ctx)].map((role) => runWorker(ctx, { ...role, signal: stop.signal }));
      const enqDb = new PgDb(pg.url, { max: 2 });
      const sent = new Map<number, number>();
      const warmup = 20;
      const tick = p.counter(label, count, `messages, one every ${spacingMs} ms`);
      for (let i = 0; i < count + warmup; i++) {
        const id = await mailbox.insertInbound(flopText(i, FLIGHTS));
        const t0 = performance.now();
        await enqDb.query(`SELECT pg_notify($1, $2)`, [MAILBOX_CHANNEL, String(id)]);
        if (i >= warmup) sent.set(id, t0);
        await sleep(spacingMs);
        if (i >= warmup) tick(i - warmup + 1);
      }
      const deadline = Date.now() + 10_000;
      while ([...sent.keys()].some((id) => !starts.has(id)) && Date.now() < deadline) await sleep(20);
      const lat = [...sent].filter(([id]) => starts.has(id)).map(([id, t0]) => starts.get(id)! - t0);
      if (lat.length < sent.size) throw new Error(`${sent.size - lat.length} messages never started`);
      const l = latency(lat);
      p50.push(l.p50);
      p99.push(l.p99);
      max.push(l.max);
      p.step(label, `p50 ${l.p50.toFixed(2)} ms, p99 ${l.p99.toFixed(2)} ms, max ${l.max.toFixed(2)} ms`);
      stop.abort();
      await Promise.all(workers);
      await enqDb.close();
    } finally {
      stop.abort();
      await mailbox.close();
      await my.drop();
      await pg.drop();
    }
  }
  return {
    scenario: 'wakeup',
    title: 'Wake-up latency: ingress wake-up → processor start (warm poller and pump, LISTEN/NOTIFY)',
    figures: [
      figure('wakeup.p50', 'wake-up p50 (ingress NOTIFY → poller → processor start)', 'ms', p50, {
        target: { op: '<', value: 5 },
        headline: true,
      }),
      figure('wakeup.p99', 'wake-up p99', 'ms', p99, { target: { op: '<', value: 20 }, headline: true }),
      figure('wakeup.max', 'wake-up max', 'ms', max, { better: 'lower' }),
    ],
    notes: [],
    meta: { messagesPerRun: count, spacingMs, warmup: 20, mailbox: 'mysql' },
  };
}
