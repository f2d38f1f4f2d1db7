import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../lib/config/config.ts';
import { ensureTopics } from '../../lib/outbox/topics.ts';
import { freshMysql, freshPg, randomName, serviceUrls } from '../lib/env.ts';
import { call, freePort, openLoop } from '../lib/http.ts';
import { embeddedLoad } from '../lib/embedded.ts';
import { progress } from '../lib/progress.ts';
import { figure, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { latency, sleep } from '../lib/stats.ts';
import { cpuSeconds, startTwin, stopTwin } from '../lib/twin.ts';
import { flight, flop } from '../../test/fixtures/messages/build.ts';

/**
 * The twin (lib/twin/main.ts, every role running, real PG, MariaDB mailbox and Kafka) in a child
 * process; an open-loop generator in this process at 500 requests/s: `POST /cminmsgs/send` for
 * `seconds`, then the half-message API (`POST /v1/tx-messages` and, on its answer, the commit:
 * 250 pairs/s = 500 requests/s). Latency from each request's scheduled time; errors = non-2xx or
 * network errors.
 */
export async function httpScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('http');
  const seconds = o.quick ? 5 : 20;
  const rate = 500;
  const sendP50: number[] = [];
  const sendP99: number[] = [];
  const sendErr: number[] = [];
  const txP50: number[] = [];
  const txP99: number[] = [];
  const txErr: number[] = [];
  const lateAll: number[] = [];
  const soloP50: number[] = [];
  const soloTxP50: number[] = [];
  const waits: Record<string, number> = {};
  const sendCpu: number[] = [];
  const txCpu: number[] = [];
  const errSamples: string[] = [];
  // The producer's check-back endpoint (never called within the run: commits come at once).
  const check = createServer((_q, s) => s.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"COMMIT"}'));
  await new Promise<void>((r) => check.listen(0, '127.0.0.1', r));
  const checkAddr = check.address();
  const checkOrigin = `http://127.0.0.1:${typeof checkAddr === 'object' && checkAddr ? checkAddr.port : 0}`;
  try {
    for (let r = 0; r < o.runs; r++) {
      const label = `${r + 1}/${o.runs}`;
      const pg = await freshPg();
      const pgClient = (await import('pg')).default.Client;
      const my = await freshMysql();
      const dataDir = mkdtempSync(join(tmpdir(), 'msgx-bench-twin-'));
      const port = await freePort();
      const txTopic = randomName('bench.tx');
      const env = {
        MSGX_PG_URL: pg.url,
        MSGX_MAILBOX_URL: my.url,
        MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
        MSGX_TOPIC_MSG: randomName('bench.msg'),
        MSGX_TOPIC_SCHD: randomName('bench.schd'),
        // A deployment's own offsets topic, as its msg and schd: a shared one grows with every run.
        MSGX_TOPIC_OFFSETS: randomName('bench.offsets'),
        MSGX_HTTP_PORT: String(port),
        MSGX_TX_CHECK_ALLOWED_ORIGINS: checkOrigin,
        MSGX_LOG_LEVEL: 'WARN',
        MSGX_DATA_DIR: dataDir,
      };
      await ensureTopics(loadConfig({ MSGX_RUNTIME: 'twin', ...env }), [txTopic]);
      await pg.db.close(); // the twin has its own pool; keep ours from holding connections
      let twin: ChildProcess | null = null;
      try {
        p.step(label, 'starting the twin');
        twin = await startTwin(env, port);
        // Warm-up: a few of each, not counted.
        for (let i = 0; i < 20; i++) {
          await call(port, 'POST', '/cminmsgs/send', flop('ETOT', { seqn: 900_000 + i }, flight({ FLID: '999', ETOT: '20261129101500' })), {
            'content-type': 'application/xml',
          });
          const t = await call(
            port,
            'POST',
            '/v1/tx-messages',
            JSON.stringify({ topic: txTopic, key: 'k', payload: { i }, checkUrl: `${checkOrigin}/check` }),
            { 'content-type': 'application/json' },
          );
          await call(port, 'POST', `/v1/tx-messages/${JSON.parse(t.body).id}/commit`);
        }

        // Unloaded service time: one request at a time (closed loop), the floor under the p50.
        {
          const lat: number[] = [];
          for (let i = 0; i < 200; i++) {
            const t = performance.now();
            await call(
              port,
              'POST',
              '/cminmsgs/send',
              flop('ETOT', { seqn: 800_000 + i }, flight({ FLID: '999', ETOT: '20261129101500' })),
              { 'content-type': 'application/xml' },
            );
            lat.push(performance.now() - t);
          }
          const l = latency(lat);
          soloP50.push(l.p50);
          const tl: number[] = [];
          for (let i = 0; i < 100; i++) {
            const t = performance.now();
            const res = await call(
              port,
              'POST',
              '/v1/tx-messages',
              JSON.stringify({ topic: txTopic, key: 'solo', payload: { i }, checkUrl: `${checkOrigin}/check` }),
              { 'content-type': 'application/json' },
            );
            tl.push(performance.now() - t);
            const c0 = performance.now();
            await call(port, 'POST', `/v1/tx-messages/${JSON.parse(res.body).id}/commit`);
            tl.push(performance.now() - c0);
          }
          soloTxP50.push(latency(tl).p50);
          p.step(label, `unloaded send (one at a time): p50 ${l.p50.toFixed(2)} ms, p99 ${l.p99.toFixed(2)} ms`);
        }

        // What the twin's database sessions wait on during the load (the limiting factor).
        const sampler = new pgClient({ connectionString: pg.url });
        await sampler.connect();
        let sampling = true;
        const sampleLoop = (async () => {
          while (sampling) {
            const r = await sampler
              .query<{ w: string; n: number }>(
                `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS w, count(*)::int AS n FROM pg_stat_activity
               WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active' GROUP BY 1`,
              )
              .catch(() => ({ rows: [] as { w: string; n: number }[] }));
            for (const row of r.rows) waits[row.w] = (waits[row.w] ?? 0) + row.n;
            await sleep(50);
          }
        })();

        // POST /cminmsgs/send
        {
          const cpu0 = cpuSeconds(twin.pid!);
          const w0 = performance.now();
          const lat: number[] = [];
          let errors = 0;
          const pending: Promise<void>[] = [];
          const tick = p.counter(label, rate * seconds, 'POST /cminmsgs/send');
          const { late } = await openLoop(
            rate,
            seconds,
            (i, at) => {
              const body = flop(
                'ETOT',
                { seqn: 1_000_000 * (r + 1) + i },
                flight({ FLID: String(200000 + (i % 500)), ETOT: '20261129101500' }),
              );
              pending.push(
                call(port, 'POST', '/cminmsgs/send', body, { 'content-type': 'application/xml' }).then(
                  (res) => {
                    lat.push(performance.now() - at);
                    if (res.status !== 200) {
                      errors++;
                      if (errSamples.length < 5) errSamples.push(`send ${res.status} ${res.body.slice(0, 200)}`);
                    }
                  },
                  (err) => {
                    errors++;
                    if (errSamples.length < 5) errSamples.push(`send ${String(err)}`);
                  },
                ),
              );
            },
            tick,
          );
          await Promise.all(pending);
          sendCpu.push(((cpuSeconds(twin.pid!) - cpu0) / ((performance.now() - w0) / 1000)) * 100);
          const l = latency(lat);
          sendP50.push(l.p50);
          sendP99.push(l.p99);
          sendErr.push(errors);
          lateAll.push(late);
          p.step(
            label,
            `send: p50 ${l.p50.toFixed(2)} ms, p99 ${l.p99.toFixed(2)} ms, ${errors} errors, ${late} fired > 5 ms late, twin CPU ${sendCpu.at(-1)!.toFixed(0)}%`,
          );
        }

        // POST /v1/tx-messages + commit
        {
          const cpu0 = cpuSeconds(twin.pid!);
          const w0 = performance.now();
          const lat: number[] = [];
          let errors = 0;
          const pending: Promise<void>[] = [];
          const tick = p.counter(label, rate * seconds, 'tx-messages requests (prepare + commit)');
          const fail = (what: string) => (err: unknown) => {
            errors++;
            if (errSamples.length < 5) errSamples.push(`${what} ${String(err)}`);
          };
          const { late } = await openLoop(
            rate / 2,
            seconds,
            (i, at) => {
              const body = JSON.stringify({
                topic: txTopic,
                key: `order-${i}`,
                payload: { orderId: i, amount: 100 + (i % 7) },
                checkUrl: `${checkOrigin}/check`,
              });
              pending.push(
                call(port, 'POST', '/v1/tx-messages', body, { 'content-type': 'application/json' }).then(async (res) => {
                  lat.push(performance.now() - at);
                  if (res.status !== 201) {
                    errors++;
                    if (errSamples.length < 5) errSamples.push(`prepare ${res.status} ${res.body.slice(0, 200)}`);
                    return;
                  }
                  const id = (JSON.parse(res.body) as { id: string }).id;
                  const c0 = performance.now();
                  const c = await call(port, 'POST', `/v1/tx-messages/${id}/commit`).catch((e) => {
                    fail('commit')(e);
                    return null;
                  });
                  if (!c) return;
                  lat.push(performance.now() - c0);
                  if (c.status !== 200) {
                    errors++;
                    if (errSamples.length < 5) errSamples.push(`commit ${c.status} ${c.body.slice(0, 200)}`);
                  }
                }, fail('prepare')),
              );
            },
            (i) => tick(i * 2),
          );
          await Promise.all(pending);
          txCpu.push(((cpuSeconds(twin.pid!) - cpu0) / ((performance.now() - w0) / 1000)) * 100);
          const l = latency(lat);
          txP50.push(l.p50);
          txP99.push(l.p99);
          txErr.push(errors);
          lateAll.push(late);
          p.step(label, `tx-messages: p50 ${l.p50.toFixed(2)} ms, p99 ${l.p99.toFixed(2)} ms, ${errors} errors`);
        }
        sampling = false;
        await sampleLoop;
        await sampler.end();
      } finally {
        if (twin) await stopTwin(twin);
        rmSync(dataDir, { recursive: true, force: true });
        await my.drop();
        await pg.drop();
      }
    }
  } finally {
    check.close();
  }
  // The embedded twin (PGlite, mailbox tables in it, file sink): 20 closed-loop clients.
  const embRps: number[] = [];
  const embPeak: number[] = [];
  const embCpu: number[] = [];
  const embSeconds = o.quick ? 5 : 10;
  for (let r = 0; r < o.runs; r++) {
    const e = await embeddedLoad({ seconds: embSeconds, clients: 20 });
    if (e.errors > 0 && errSamples.length < 5) errSamples.push(`embedded: ${e.errors} failed requests`);
    embRps.push(e.rps);
    embPeak.push(e.peakRss);
    embCpu.push(e.cpu);
    p.step(
      `embedded ${r + 1}/${o.runs}`,
      `${e.rps.toFixed(0)} requests/s, ${e.errors} errors, peak ${e.peakRss.toFixed(0)} MiB, twin CPU ${e.cpu.toFixed(0)}%${e.processedWithin ? '' : ' (backlog not drained within 120 s)'}`,
    );
  }
  return {
    scenario: 'http',
    title: `HTTP through the twin, open loop at ${rate} requests/s for ${seconds} s`,
    figures: [
      figure('http.solo.p50', 'POST /cminmsgs/send unloaded, one at a time, p50', 'ms', soloP50, { better: 'lower' }),
      figure('http.solo.tx.p50', 'tx-messages prepare/commit unloaded, one at a time, p50', 'ms', soloTxP50, { better: 'lower' }),
      figure('http.send.cpu', 'twin CPU during send load (100% = one core)', '%', sendCpu, { better: 'lower' }),
      figure('http.tx.cpu', 'twin CPU during tx-messages load', '%', txCpu, { better: 'lower' }),
      figure('http.send.p50', 'POST /cminmsgs/send p50', 'ms', sendP50, { better: 'lower' }),
      figure('http.send.p99', 'POST /cminmsgs/send p99', 'ms', sendP99, { target: { op: '<', value: 20 }, headline: true }),
      figure('http.send.errors', 'POST /cminmsgs/send errors', 'count', sendErr, { target: { op: '<', value: 1 } }),
      figure('http.tx.p50', 'tx-messages prepare + commit p50', 'ms', txP50, { better: 'lower' }),
      figure('http.tx.p99', 'tx-messages prepare + commit p99', 'ms', txP99, { target: { op: '<', value: 20 }, headline: true }),
      figure('http.tx.errors', 'tx-messages errors', 'count', txErr, { target: { op: '<', value: 1 } }),
      figure(
        'http.embedded.rps',
        `embedded twin: POST /cminmsgs/send from 20 concurrent clients (${embSeconds} s, processing meanwhile)`,
        'req/s',
        embRps,
        { target: { op: '>=', value: 500 }, headline: true },
      ),
      figure('http.embedded.peak', 'embedded twin peak RSS under that load (VmHWM)', 'MiB', embPeak, { better: 'lower' }),
      figure('http.embedded.cpu', 'embedded twin CPU under that load (100% = one core)', '%', embCpu, { better: 'lower' }),
    ],
    notes: errSamples.length ? [`error samples: ${errSamples.join(' | ')}`] : [],
    meta: {
      rate,
      seconds,
      firedLate: lateAll,
      pgActiveSessionSamples: waits,
      twin: 'child process: node --import tsx lib/twin/main.ts (all roles running)',
    },
  };
}
