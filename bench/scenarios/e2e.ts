import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import mysql from 'mysql2/promise';
import { flight, flop } from '../../test/fixtures/messages/build.ts';
import { freshMysql, freshPg, randomName, serviceUrls, type TestPg } from '../lib/env.ts';
import { freePort } from '../lib/http.ts';
import { pgbenchCommitRate } from '../lib/pgbench.ts';
import { type Progress, progress } from '../lib/progress.ts';
import { figure, ratios, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { sleep } from '../lib/stats.ts';
import { cpuSeconds, peakRssMiB, startTwin, stopTwin } from '../lib/twin.ts';
import { type CpuReading, cpuPerMessage, cpuProbe } from '../lib/procCpu.ts';
import { type TopicWatch, watchTopic } from '../lib/topicWatch.ts';
import { bulkInsertMailbox, DAY, flidOf, planText } from '../lib/workload.ts';

const FLIGHTS = 2000;
const TERMINAL = `('SUCCEEDED','SKIPPED','DEAD')`;

/** Gate change i: flight i mod FLIGHTS to gate G<i>, a real change every time. */
const gateText = (i: number) =>
  flop(
    'GATE',
    { seqn: 20_000 + i, dttm: '20261129060000' },
    flight({ FLID: flidOf(i, FLIGHTS), GATE: [{ CODE: `G${i}`, BEG: `${DAY}093000`, END: `${DAY}101500` }] }),
  );

interface E2eRun {
  terminalMs: number;
  backfilledMs: number;
  deliveredMs: number;
  peakRss: number;
  records: number;
  /** The twin's CPU until all were terminal, 100 = one core. */
  twinCpuPct: number;
  /** CPU per message by process, insert → the last record read by the consumer, in µs. */
  cpuUs: ReturnType<typeof cpuPerMessage>;
}

/** Sum of the end offsets of every partition of `topic`: what the broker acknowledged. */
async function topicRecords(topic: string): Promise<number> {
  const admin = new Kafka({ clientId: 'msgx-bench-e2e', brokers: serviceUrls().kafkaBrokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((s, p) => s + Number(p.high) - Number(p.low), 0);
  } finally {
    await admin.disconnect();
  }
}

/**
 * The whole twin as a user runs it (a child process, every role, real PG, the mailbox in MariaDB
 * or in PostgreSQL, real Kafka): a day plan, then `count` gate changes bulk-inserted into
 * CMINMSGS, timed until every message is terminal, every mailbox row back-filled and every event
 * acknowledged by Kafka.
 */
async function timedE2e(kind: 'mysql' | 'pg', count: number, p: Progress, label: string): Promise<E2eRun> {
  const pg: TestPg = await freshPg();
  const my = kind === 'mysql' ? await freshMysql() : null;
  const dataDir = mkdtempSync(join(tmpdir(), 'msgx-bench-e2e-'));
  const port = await freePort();
  const topicMsg = randomName('bench.e2e.msg');
  const env: Record<string, string> = {
    MSGX_PG_URL: pg.url,
    MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
    MSGX_TOPIC_MSG: topicMsg,
    MSGX_TOPIC_SCHD: randomName('bench.e2e.schd'),
    // A deployment's own offsets topic, as its msg and schd: a shared one grows with every run.
    MSGX_TOPIC_OFFSETS: randomName('bench.e2e.offsets'),
    MSGX_HTTP_PORT: String(port),
    MSGX_LOG_LEVEL: 'WARN',
    MSGX_DATA_DIR: dataDir,
    ...(my ? { MSGX_MAILBOX_URL: my.url } : {}),
  };
  const conn = my ? await mysql.createConnection({ uri: my.url }) : null;
  const unprocessed = async (): Promise<number> => {
    if (conn) {
      const [rows] = await conn.query('SELECT count(*) AS n FROM CMINMSGS WHERE DATE_PROCESSED IS NULL');
      return Number((rows as { n: number }[])[0]!.n);
    }
    const r = await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "CMINMSGS" WHERE "DATE_PROCESSED" IS NULL`);
    return r.rows[0]!.n;
  };
  const mailboxMaxId = async (): Promise<number> => {
    if (conn) {
      const [rows] = await conn.query('SELECT coalesce(max(ID), 0) AS n FROM CMINMSGS');
      return Number((rows as { n: number }[])[0]!.n);
    }
    return (await pg.db.query<{ n: number }>(`SELECT coalesce(max("ID"), 0)::int AS n FROM "CMINMSGS"`)).rows[0]!.n;
  };
  const mailboxIdsAfter = async (after: number): Promise<number[]> => {
    if (conn) {
      const [rows] = await conn.query('SELECT ID AS id FROM CMINMSGS WHERE ID > ? ORDER BY ID', [after]);
      return (rows as { id: number }[]).map((r) => Number(r.id));
    }
    const r = await pg.db.query<{ id: number }>(`SELECT "ID"::int AS id FROM "CMINMSGS" WHERE "ID" > $1 ORDER BY "ID"`, [after]);
    return r.rows.map((x) => x.id);
  };
  const q = async (sql: string, params: unknown[] = []) => (await pg.db.query<{ n: number }>(sql, params)).rows[0]!.n;
  const target = my ? ({ kind: 'mysql', url: my.url } as const) : ({ kind: 'pg', db: pg.db } as const);
  let twin: ChildProcess | null = null;
  let watch: TopicWatch | null = null;
  try {
    twin = await startTwin(env, port);
    watch = await watchTopic(topicMsg);
    await bulkInsertMailbox(target, [planText(FLIGHTS)]);
    const planId = await mailboxMaxId();
    await watch.waitFor([planId], 120_000, 'the day plan');
    const planRecords = () => watch!.records.get(planId) ?? 0;
    const planDeadline = Date.now() + 120_000;
    while (planRecords() < FLIGHTS) {
      if (Date.now() > planDeadline) throw new Error(`day plan: ${planRecords()} of ${FLIGHTS} flights on ${topicMsg} within 120 s`);
      await sleep(50);
    }
    const planMax = await q(`SELECT max(msg_id)::int AS n FROM proc_state`);
    p.step(label, `${FLIGHTS} flights planned and delivered; inserting ${count} gate changes (mailbox ${kind})`);

    const tick = p.counter(label, count, 'terminal');
    const probe = await cpuProbe({ twinPid: twin.pid!, pgUrl: pg.url, mysqlUrl: my?.url, kafkaBroker: serviceUrls().kafkaBrokers[0]! });
    let gateIds: number[] = [];
    const cpuAt0 = probe.read();
    let cpuAtDelivered: CpuReading | null = null;
    const cpu0 = cpuSeconds(twin.pid!);
    const t0 = performance.now();
    await bulkInsertMailbox(
      target,
      Array.from({ length: count }, (_, i) => gateText(i)),
    );
    gateIds = await mailboxIdsAfter(planId);
    if (gateIds.length !== count) throw new Error(`the mailbox holds ${gateIds.length} gate changes, expected ${count}`);
    let terminalMs = 0;
    let twinCpuPct = 0;
    let backfilledMs = 0;
    let deliveredMs = 0;
    const stop = Date.now() + 15 * 60_000;
    // Polled every 50 ms while the twin works, so the probes must cost it next to nothing: one
    // probe of each open-rows index (a count of SENT rows read the whole of msg_event 20 times a
    // second, a noticeable share of the server's CPU); the terminal count only when nothing is
    // open, and once a second for the progress line.
    const terminalCount = () => q(`SELECT count(*)::int AS n FROM proc_state WHERE msg_id > $1 AND status IN ${TERMINAL}`, [planMax]);
    const anyOpen = async (sql: string) => (await pg.db.query<{ open: boolean }>(`SELECT EXISTS (${sql}) AS open`)).rows[0]!.open;
    for (let i = 0; !(terminalMs && backfilledMs && deliveredMs); i++) {
      if (Date.now() > stop)
        throw new Error(`not done within 15 min (terminal ${terminalMs}, backfilled ${backfilledMs}, delivered ${deliveredMs})`);
      if (!terminalMs) {
        const busy = await anyOpen(`SELECT 1 FROM proc_state WHERE status IN ('PENDING', 'FAILED')`);
        const now = performance.now() - t0;
        if (!busy || i % 20 === 0) {
          const terminal = await terminalCount();
          tick(terminal);
          if (terminal >= count) {
            terminalMs = now;
            twinCpuPct = ((cpuSeconds(twin.pid!) - cpu0) / (now / 1000)) * 100;
          }
        }
      }
      if (terminalMs && !backfilledMs && (await unprocessed()) === 0) backfilledMs = performance.now() - t0;
      if (terminalMs && !deliveredMs && gateIds.every((id) => watch!.firstSeen.has(id))) {
        deliveredMs = Math.max(...gateIds.map((id) => watch!.firstSeen.get(id)!)) - t0;
        cpuAtDelivered = probe.read();
      }
      await sleep(50);
    }
    tick(count, true);
    const peakRss = peakRssMiB(twin.pid!);
    // The work really happened: every gate change succeeded and changed its flight.
    const ok = await q(`SELECT count(*)::int AS n FROM proc_state WHERE msg_id > $1 AND status = 'SUCCEEDED'`, [planMax]);
    if (ok !== count) throw new Error(`only ${ok} of ${count} gate changes succeeded`);
    const records = await topicRecords(topicMsg);
    if (records < count) throw new Error(`Kafka holds ${records} records on ${topicMsg}, expected at least ${count}`);
    return { terminalMs, backfilledMs, deliveredMs, peakRss, records, twinCpuPct, cpuUs: cpuPerMessage(cpuAt0, cpuAtDelivered!, count) };
  } finally {
    await watch?.stop();
    if (twin) await stopTwin(twin);
    await conn?.end();
    await my?.drop();
    await pg.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function e2eScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('e2e');
  const count = o.quick ? 2000 : 10_000;
  const pgbenchSecs = o.quick ? 3 : 10;
  const bench: number[] = [];
  const rate = { mysql: [] as number[], pg: [] as number[] };
  const terminalRate: number[] = [];
  const rss: number[] = [];
  const twinCpu: number[] = [];
  const cpu = { twin: [] as number[], postgres: [] as number[], mariadb: [] as number[], broker: [] as number[], total: [] as number[] };
  const runsMeta: unknown[] = [];
  for (let r = 0; r < o.runs; r++) {
    const label = `${r + 1}/${o.runs}`;
    p.step(label, `pgbench -c1 -T${pgbenchSecs} before`);
    const before = await pgbenchCommitRate(pgbenchSecs);
    const runs: Partial<Record<'mysql' | 'pg', E2eRun>> = {};
    for (const kind of ['mysql', 'pg'] as const) {
      const e = await timedE2e(kind, count, p, label);
      runs[kind] = e;
      rate[kind].push((count / e.deliveredMs) * 1000);
      if (kind === 'mysql') terminalRate.push((count / e.terminalMs) * 1000);
      rss.push(e.peakRss);
      if (kind === 'mysql') {
        twinCpu.push(e.twinCpuPct);
        for (const k of Object.keys(cpu) as (keyof typeof cpu)[]) cpu[k].push(e.cpuUs[k]);
      }
      p.step(
        label,
        `mailbox ${kind}: terminal ${(e.terminalMs / 1000).toFixed(1)} s, back-filled ${(e.backfilledMs / 1000).toFixed(1)} s, delivered ${(e.deliveredMs / 1000).toFixed(1)} s → ${rate[kind].at(-1)!.toFixed(0)} msg/s; twin CPU ${e.twinCpuPct.toFixed(0)} % until terminal; CPU/msg ${e.cpuUs.total.toFixed(0)} µs (twin ${e.cpuUs.twin.toFixed(0)}, PG ${e.cpuUs.postgres.toFixed(0)}, MariaDB ${e.cpuUs.mariadb.toFixed(0)}, broker ${e.cpuUs.broker.toFixed(0)}); peak RSS ${e.peakRss.toFixed(0)} MiB`,
      );
    }
    p.step(label, `pgbench -c1 -T${pgbenchSecs} after`);
    const after = await pgbenchCommitRate(pgbenchSecs);
    bench.push((before + after) / 2);
    runsMeta.push({ pgbenchBefore: before, pgbenchAfter: after, ...runs });
  }
  return {
    scenario: 'e2e',
    title: `End to end: ${count.toLocaleString('en-US')} gate changes, mailbox → terminal + back-filled + on Kafka (the twin, every role)`,
    figures: [
      figure('e2e.pgbench', 'pgbench single-client commit rate (mean of before/after)', 'tx/s', bench),
      figure('e2e.mysql', 'end to end, mailbox MariaDB', 'msg/s', rate.mysql, { headline: true }),
      figure('e2e.pg', 'end to end, mailbox in PostgreSQL', 'msg/s', rate.pg),
      figure('e2e.mysql.terminal', 'all terminal (not yet delivered), mailbox MariaDB', 'msg/s', terminalRate),
      figure('e2e.mysql.vs.pgbench', 'end to end (MariaDB) / pgbench commit rate', 'x', ratios(rate.mysql, bench), {
        target: { op: '>=', value: 2 },
        headline: true,
      }),
      figure('e2e.pg.vs.pgbench', 'end to end (PG mailbox) / pgbench commit rate', 'x', ratios(rate.pg, bench), {
        target: { op: '>=', value: 2 },
      }),
      figure('e2e.rss', 'twin peak RSS during the run', 'MiB', rss, { better: 'lower' }),
      figure('e2e.mysql.twin.cpu', 'twin CPU until all terminal, mailbox MariaDB (100 % = one core)', '%', twinCpu),
      figure('e2e.mysql.cpu.total', 'CPU per message, all processes (MariaDB mailbox, insert → last record read)', 'µs', cpu.total, {
        target: { op: '<', value: 500 },
        headline: true,
      }),
      figure('e2e.mysql.cpu.twin', 'CPU per message: twin', 'µs', cpu.twin, { better: 'lower' }),
      figure('e2e.mysql.cpu.postgres', 'CPU per message: PostgreSQL (server and backends)', 'µs', cpu.postgres, { better: 'lower' }),
      figure('e2e.mysql.cpu.mariadb', 'CPU per message: MariaDB', 'µs', cpu.mariadb, { better: 'lower' }),
      figure('e2e.mysql.cpu.broker', 'CPU per message: Kafka broker', 'µs', cpu.broker, { better: 'lower' }),
    ],
    notes: [],
    meta: { messages: count, flights: FLIGHTS, pgbenchSeconds: pgbenchSecs, runs: runsMeta },
  };
}
