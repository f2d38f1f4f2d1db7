import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { flight, flop } from '../../test/fixtures/messages/build.ts';
import { SEND_PATH } from '../../lib/constants.ts';
import { freshMysql, freshPg, randomName, serviceUrls } from '../lib/env.ts';
import { call, freePort } from '../lib/http.ts';
import { progress } from '../lib/progress.ts';
import { figure, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { latency, sleep } from '../lib/stats.ts';
import { startTwin, stopTwin } from '../lib/twin.ts';
import { type TopicWatch, watchTopic } from '../lib/topicWatch.ts';
import { DAY, flidOf, planText } from '../lib/workload.ts';

const FLIGHTS = 200;
const RATE_PER_SECOND = 25;
const XML = { 'content-type': 'application/xml' };

const gateChange = (i: number) =>
  flop(
    'GATE',
    { seqn: 50_000 + i, dttm: '20261129060000' },
    flight({ FLID: flidOf(i, FLIGHTS), GATE: [{ CODE: `L${i}`, BEG: `${DAY}093000`, END: `${DAY}101500` }] }),
  );

/**
 * What a user feels: gate changes posted one by one through HTTP at a steady rate to the twin
 * (every role, MariaDB mailbox, real PG and Kafka), each timed from just before its POST until a
 * real consumer reads its msgx.msg record (matched by `source.msgId`, the ID the POST answered).
 * Open loop: a send is due every 1/rate s whether or not the one before it arrived.
 */
export async function latencyScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('latency');
  const count = o.quick ? 100 : 400;
  const warmup = 20;
  const e2e = { p50: [] as number[], p99: [] as number[], max: [] as number[] };
  const answered = { p50: [] as number[], p99: [] as number[] };
  const stages: Record<string, number[]> = {};
  for (let r = 0; r < o.runs; r++) {
    const label = `${r + 1}/${o.runs}`;
    const pg = await freshPg();
    const my = await freshMysql();
    const dataDir = mkdtempSync(join(tmpdir(), 'msgx-bench-latency-'));
    const port = await freePort();
    const topicMsg = randomName('bench.latency.msg');
    const env = {
      MSGX_PG_URL: pg.url,
      MSGX_MAILBOX_URL: my.url,
      MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
      MSGX_TOPIC_MSG: topicMsg,
      MSGX_TOPIC_SCHD: randomName('bench.latency.schd'),
      // A deployment's own offsets topic, as its msg and schd: a shared one grows with every run.
      MSGX_TOPIC_OFFSETS: randomName('bench.latency.offsets'),
      MSGX_HTTP_PORT: String(port),
      MSGX_LOG_LEVEL: 'WARN',
      MSGX_DATA_DIR: dataDir,
    };
    await pg.db.close(); // the twin has its own pool
    let twin: ChildProcess | null = null;
    let watch: TopicWatch | null = null;
    try {
      p.step(label, 'starting the twin and a consumer of msgx.msg');
      twin = await startTwin(env, port);
      watch = await watchTopic(topicMsg);
      const plan = await call(port, 'POST', SEND_PATH, planText(FLIGHTS), XML);
      if (plan.status !== 200) throw new Error(`day plan refused: ${plan.status} ${plan.body}`);
      await watch.waitFor([Number(plan.body)], 60_000, 'the day plan');

      const sentAt = new Map<number, number>();
      const sentWall = new Map<number, number>();
      const answeredMs: number[] = [];
      const spacing = 1000 / RATE_PER_SECOND;
      const tick = p.counter(label, count, `sends at ${RATE_PER_SECOND}/s`);
      const start = performance.now();
      const inFlight: Promise<void>[] = [];
      for (let i = 0; i < warmup + count; i++) {
        const due = start + i * spacing;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const t0 = performance.now();
        const wall0 = Date.now();
        inFlight.push(
          call(port, 'POST', SEND_PATH, gateChange(i), XML).then((res) => {
            if (res.status !== 200) throw new Error(`send ${i} refused: ${res.status} ${res.body}`);
            if (i < warmup) return;
            answeredMs.push(performance.now() - t0);
            sentAt.set(Number(res.body), t0);
            sentWall.set(Number(res.body), wall0);
            tick(sentAt.size);
          }),
        );
      }
      await Promise.all(inFlight);
      await watch.waitFor(sentAt.keys(), 60_000, 'the gate changes');
      tick(count, true);
      const lat = latency([...sentAt].map(([id, t0]) => watch!.firstSeen.get(id)! - t0));
      const ans = latency(answeredMs);
      e2e.p50.push(lat.p50);
      e2e.p99.push(lat.p99);
      e2e.max.push(lat.max);
      answered.p50.push(ans.p50);
      answered.p99.push(ans.p99);
      const st = await stagesOf(
        port,
        [...sentWall].filter((_, k) => k % 8 === 0),
        (id) => watch!.firstSeen.get(id)! - sentAt.get(id)!,
      );
      for (const [k, v] of Object.entries(st)) (stages[k] ??= []).push(v);
      p.step(
        label,
        `stages, median ms after the POST: ${Object.entries(st)
          .map(([k, v]) => `${k} ${v.toFixed(1)}`)
          .join(', ')}`,
      );
      p.step(
        label,
        `send → consumer p50 ${lat.p50.toFixed(1)} ms, p99 ${lat.p99.toFixed(1)} ms, max ${lat.max.toFixed(1)} ms; HTTP answered p50 ${ans.p50.toFixed(1)} ms`,
      );
    } finally {
      await watch?.stop();
      if (twin) await stopTwin(twin);
      await my.drop();
      await pg.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  return {
    scenario: 'latency',
    title: `Send → record read by a Kafka consumer: ${count} gate changes through HTTP at ${RATE_PER_SECOND}/s (the twin, every role)`,
    figures: [
      figure('latency.p50', 'send → consumer, p50', 'ms', e2e.p50, { target: { op: '<', value: 10 }, headline: true }),
      figure('latency.p99', 'send → consumer, p99', 'ms', e2e.p99, { target: { op: '<', value: 50 }, headline: true }),
      figure('latency.max', 'send → consumer, max', 'ms', e2e.max, { better: 'lower' }),
      figure('latency.answered.p50', 'HTTP answered (row stored in the mailbox), p50', 'ms', answered.p50, { better: 'lower' }),
      figure('latency.answered.p99', 'HTTP answered, p99', 'ms', answered.p99, { better: 'lower' }),
    ],
    notes: [
      `where a send's time goes (median ms after its POST, per run, from the trace of every 8th send and the consumer): ${Object.entries(
        stages,
      )
        .map(([k, v]) => `${k} ${v.map((x) => x.toFixed(1)).join('/')}`)
        .join('; ')}`,
    ],
    meta: { messages: count, warmup, ratePerSecond: RATE_PER_SECOND, flights: FLIGHTS, stages },
  };
}

/** Trace steps a send passes, in order: the first timeline entry of each kind (the msg event's, for event kinds). */
const STAGES = ['enqueued', 'attempt', 'event', 'published', 'sent'] as const;

/**
 * The median time after its POST at which each send reached each step, from its trace
 * (GET /admin/trace/{id}, the twin's clock, on this machine) and, last, the consumer's read.
 */
async function stagesOf(port: number, sends: [number, number][], consumerMs: (id: number) => number): Promise<Record<string, number>> {
  const per: Record<string, number[]> = {};
  for (const [id, wall0] of sends) {
    const res = await call(port, 'GET', `/admin/trace/${id}`);
    if (res.status !== 200) throw new Error(`trace of ${id}: ${res.status} ${res.body.slice(0, 200)}`);
    const t = JSON.parse(res.body) as {
      events: { eventId: number; target: string }[];
      timeline: { kind: string; at: string; detail: Record<string, unknown> }[];
    };
    const msgEvent = t.events.find((e) => e.target === 'msg')?.eventId;
    for (const kind of STAGES) {
      const entry = t.timeline.find(
        (e) => e.kind === kind && (!['event', 'published', 'sent'].includes(kind) || e.detail.eventId === msgEvent),
      );
      if (entry) (per[kind] ??= []).push(Date.parse(entry.at) - wall0);
    }
    (per.consumer ??= []).push(consumerMs(id));
  }
  return Object.fromEntries(Object.entries(per).map(([k, v]) => [k, latency(v).p50]));
}
