import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import kafkajs from 'kafkajs';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { IAM_PRINCIPAL_HEADER, start } from '../../test/cloud/emulator/index.ts';
import { type CloudAssembly, synthStage } from '../../test/cloud/emulator/synth.ts';
import { flight, flop, schd } from '../../test/fixtures/messages/build.ts';
import { n, progress } from '../lib/progress.ts';
import { figure, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { latency, sleep } from '../lib/stats.ts';

const { Kafka, logLevel } = kafkajs;

/**
 * The dev stage in the emulated cloud (test/cloud/emulator): `cdk synth`'s assembly deployed as
 * `cdk deploy` would, its functions run from their bundles with the template's handler, timeout
 * and environment, the schedules on a real-time clock (rate(1 minute) fires once a minute), the
 * real PostgreSQL, MariaDB (the mailbox) and Kafka. Measured from outside, as the issue asks:
 * - rows INSERTed into CMINMSGS at spread seconds of the schedule's minute, each timed from its
 *   commit until a real Kafka consumer (read_committed) reads its msgx.msg record;
 * - sends through the API (POST /cminmsgs/send as an IAM caller), timed from the request until
 *   the record is read;
 * - a burst of 1,000 sends (16 in flight, an upstream's connection pool; the dev stage's API
 *   throttle is 20 req/s with a burst of 40, which the emulator does not apply), counting the
 *   Lambda invocations per function and the peak PostgreSQL and MariaDB connections.
 * One deployment per invocation (a deploy takes minutes); samples are spread over its minutes.
 * MSGX_CLOUD_ASSEMBLY=<file> reuses a synth as the cloud tests do.
 */
const DAY = '20261202';
const UPSTREAM = 'arn:aws:sts::210987654321:assumed-role/cmin-upstream/bench';
const ROLES = ['ingress', 'poller', 'pump', 'dispatcher', 'sweep'] as const;
/**
 * Attempts per send before it counts as lost: an upstream that must deliver keeps retrying for
 * ~10 s (at 16 in flight against the emulated stage's 4 ingress environments, 6 attempts gave up
 * on 8 of 1,000 sends).
 */
const SEND_ATTEMPTS = 10;

export async function cloudScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('cloud');
  const rows = o.quick ? 60 : 120;
  const sends = o.quick ? 60 : 160;
  const burst = 1_000;
  const inFlight = 16;
  const keep = process.env.MSGX_CLOUD_ASSEMBLY;
  let assembly: CloudAssembly;
  // MSGX_BENCH_CLOUD_STAGE='{"functions":{…}}': cdk.json's dev stage with these settings merged, to compare.
  const stageSettings = process.env.MSGX_BENCH_CLOUD_STAGE
    ? (JSON.parse(process.env.MSGX_BENCH_CLOUD_STAGE) as Record<string, unknown>)
    : undefined;
  if (keep && existsSync(keep)) assembly = JSON.parse(readFileSync(keep, 'utf8')) as CloudAssembly;
  else {
    p.step('', `cdk synth of the dev stage (1-3 min)${stageSettings ? ` with ${JSON.stringify(stageSettings)}` : ''}`);
    assembly = await synthStage('dev', { stageSettings });
  }
  p.step('', `deploying ${assembly.outdir}`);
  const emu = await start('dev', { assembly, clockFactor: 1 });
  const reader = new Reader(emu.kafka.brokers, emu.kafka.topics.msg);
  const owner = await mysql.createConnection({ uri: emu.mailbox.ownerUrl });
  const notes: string[] = [];
  try {
    await reader.start();
    const RUN = Date.now().toString(36).slice(-4).toUpperCase();
    const flids = Array.from({ length: 20 }, (_, i) => `B${RUN}${i}`);
    let seqn = 0;
    // Every change carries an ETOT no earlier change had (06:00:00 plus one second per change): a
    // FLOP that leaves the flight as it is emits no event, and sends retried under a burst arrive
    // out of order, so ETOTs that recur (they did every 240 changes) made some sends never read.
    const change = (i: number) => {
      const s = ++seqn;
      const at = 6 * 3600 + s;
      const hhmmss = [Math.floor(at / 3600), Math.floor(at / 60) % 60, at % 60].map((x) => String(x).padStart(2, '0')).join('');
      const t = `${DAY}${hhmmss}`;
      return flop('ETOT', { seqn: `b${RUN}-${s}`, dttm: t }, flight({ FLID: flids[i % flids.length]!, ETOT: t }));
    };
    const refused: string[] = [];
    // As an upstream sends: a 5xx (API Gateway's 500 for a throttled or failed function, 503 at its
    // timeout) or a 429 (its own throttle) is sent again after an exponential backoff with full
    // jitter (the AWS SDKs' policy: 100 ms doubling, here capped at 2 s), up to SEND_ATTEMPTS in
    // all; a repeat of a stored message is a duplicate msgx skips.
    const send = async (xml: string) => {
      for (let attempt = 1; ; attempt++) {
        const res = await fetch(`${emu.apiUrl}/cminmsgs/send`, {
          method: 'POST',
          headers: { 'content-type': 'application/xml', [IAM_PRINCIPAL_HEADER]: UPSTREAM },
          body: xml,
        }).catch((err: Error) => {
          if (attempt === SEND_ATTEMPTS) throw err;
          refused.push(`network: ${err.message}`);
          return null;
        });
        if (res) {
          const text = await res.text();
          if (res.status === 200) return Number(text);
          refused.push(`${res.status} ${text.slice(0, 120)}`);
          if ((res.status < 500 && res.status !== 429) || attempt === SEND_ATTEMPTS)
            throw new Error(`POST /cminmsgs/send: ${res.status} ${text.slice(0, 200)}`);
        }
        await sleep(Math.random() * Math.min(2_000, 100 * 2 ** attempt));
      }
    };

    // Warm: the day plan, and the first tick of the pump's schedule (a minute after the deploy).
    const planId = await send(
      schd('DNLD', {
        seqn: `plan${RUN}`,
        dttm: `${DAY}050000`,
        opdy: DAY,
        flights: flids.map((f) => flight({ FLID: f, OPDY: DAY, AWCD: 'CZ', FLNO: f.slice(-4), STAT: 'SCH' })),
      }),
    );
    await reader.wait([planId], 120_000);
    const tick = await waitUntil(() => emu.schedules.firings.find((f) => f.invoked && f.schedule.endsWith('-pump')), 150_000);
    p.step('', `plan read; the pump's schedule first fired ${((tick.at - Date.now()) / 1000).toFixed(1)} s ago`);
    const phase = (at: number) => (((at - tick.at) % 60_000) + 60_000) % 60_000;

    // ---- rows inserted straight into CMINMSGS, at spread seconds of the minute -----------------
    const rowStart = new Map<number, { t0: number; phase: number }>();
    const rowTick = p.counter('rows', rows, 'rows into CMINMSGS');
    for (let i = 0; i < rows; i++) {
      const [r] = await owner.query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [change(i)]);
      rowStart.set(r.insertId, { t0: performance.now(), phase: phase(Date.now()) });
      rowTick(i + 1);
      // 1,013 ms apart: over two minutes every second of the minute is hit, at drifting offsets.
      await sleep(1_013);
    }
    await reader.wait([...rowStart.keys()], 60_000);
    const rowLat = [...rowStart].map(([id, s]) => reader.readAt.get(id)! - s.t0);
    const rowL = latency(rowLat);
    p.step('rows', `p50 ${rowL.p50.toFixed(0)} ms, p99 ${rowL.p99.toFixed(0)} ms, max ${rowL.max.toFixed(0)} ms`);
    const byTen = new Map<number, number[]>();
    for (const [id, s] of rowStart) {
      const b = Math.floor(s.phase / 10_000) * 10;
      byTen.set(b, [...(byTen.get(b) ?? []), reader.readAt.get(id)! - s.t0]);
    }
    const buckets = [...byTen]
      .sort((a, b) => a[0] - b[0])
      .map(([b, xs]) => `${b}-${b + 9} s: max ${Math.max(...xs).toFixed(0)} ms (${xs.length})`);
    notes.push(`rows by second of the pump's minute (worst per 10 s): ${buckets.join('; ')}.`);

    // ---- sends through the API ---------------------------------------------------------------
    const sendStart = new Map<number, number>();
    const answer: number[] = [];
    const sendTick = p.counter('api', sends, 'sends');
    for (let i = 0; i < sends; i++) {
      const t0 = performance.now();
      const id = await send(change(i));
      answer.push(performance.now() - t0);
      sendStart.set(id, t0);
      sendTick(i + 1);
      await sleep(250);
    }
    await reader.wait([...sendStart.keys()], 60_000);
    const apiL = latency([...sendStart].map(([id, t0]) => reader.readAt.get(id)! - t0));
    const answerL = latency(answer);
    p.step(
      'api',
      `p50 ${apiL.p50.toFixed(0)} ms, p99 ${apiL.p99.toFixed(0)} ms, max ${apiL.max.toFixed(0)} ms (answer p99 ${answerL.p99.toFixed(0)} ms)`,
    );

    // ---- a burst of 1,000 sends ----------------------------------------------------------------
    const watch = new ConnectionWatch(emu.pg.superUrl, emu.mailbox.ownerUrl);
    await watch.start();
    const idle = { pg: watch.pgPeak, mariadb: watch.mariadbPeak };
    watch.reset();
    const invBefore = emu.lambda.invocations.length;
    const envPeak = new Map<string, number>();
    const envTimer = setInterval(() => {
      for (const role of ROLES) {
        const fn = emu.functionName(role);
        envPeak.set(role, Math.max(envPeak.get(role) ?? 0, emu.lambda.environments(fn)));
      }
    }, 100);
    const t0 = performance.now();
    const ids: number[] = [];
    let next = 0;
    let lost = 0;
    const burstTick = p.counter('burst', burst, 'sends');
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < burst) {
          const i = next++;
          // A send refused SEND_ATTEMPTS times is counted, not fatal: how many a burst loses is a figure.
          const id = await send(change(i)).catch(() => null);
          if (id === null) lost++;
          else ids.push(id);
          burstTick(ids.length + lost);
        }
      }),
    );
    const answered = performance.now() - t0;
    await reader.wait(ids, 120_000);
    const drained = Math.max(...ids.map((id) => reader.readAt.get(id)!)) - t0;
    await sleep(2_000);
    clearInterval(envTimer);
    await watch.stop();
    const during = emu.lambda.invocations.slice(invBefore);
    const perRole = Object.fromEntries(ROLES.map((r) => [r, during.filter((i) => i.functionName === emu.functionName(r)).length]));
    const concurrent = Object.fromEntries(
      // A throttled invocation never ran (its start and end may fall in different milliseconds).
      ROLES.map((r) => [r, peakConcurrency(during.filter((i) => i.functionName === emu.functionName(r) && i.outcome !== 'throttled'))]),
    );
    p.step(
      'burst',
      `${n(burst)} sends answered in ${(answered / 1000).toFixed(1)} s, all read in ${(drained / 1000).toFixed(1)} s; invocations ${JSON.stringify(perRole)}; peak PG ${watch.pgPeak}, MariaDB ${watch.mariadbPeak}`,
    );
    const throttled = during.filter((i) => i.outcome === 'throttled').length;
    const failed = during.filter((i) => i.outcome === 'error' || i.outcome === 'timeout');
    if (refused.length > 0 || failed.length > 0)
      notes.push(
        `${refused.length} sends answered 5xx and were sent again (${[...new Set(refused)].join('; ')}); failed invocations: ${failed
          .map((i) => `${i.functionName.split('-')[2] ?? i.functionName} ${i.outcome} ${i.error?.errorType ?? ''}`)
          .join(', ')}.`,
      );
    if (watch.failedSamples > 0) notes.push(`burst: ${watch.failedSamples} connection samples failed (last: ${watch.lastError}).`);
    const reservedOf = (r: string) => emu.lambda.functions.get(emu.functionName(r))?.latest.reservedConcurrency;
    const throttledOf = (r: string) => during.filter((i) => i.functionName === emu.functionName(r) && i.outcome === 'throttled').length;
    notes.push(
      `burst: invocations ${ROLES.map((r) => `${r} ${perRole[r]} (peak ${concurrent[r]} at once, ${envPeak.get(r) ?? 0} environments, ${throttledOf(r)} throttled, reserved ${reservedOf(r) ?? 'none'})`).join(', ')}; ${throttled} throttled in all; connections before the burst PG ${idle.pg}, MariaDB ${idle.mariadb}.`,
    );

    const one = (x: number) => [x];
    return {
      scenario: 'cloud',
      title: 'The dev stage in the emulated cloud: mailbox row or API send → msgx.msg at a Kafka consumer; a burst of 1,000 sends',
      figures: [
        figure('cloud.row.p50', 'CMINMSGS row → msgx.msg read, p50', 'ms', one(rowL.p50), { better: 'lower' }),
        figure('cloud.row.p99', 'CMINMSGS row → msgx.msg read, p99 (any second of the minute)', 'ms', one(rowL.p99), {
          target: { op: '<', value: 2000 },
          headline: true,
        }),
        figure('cloud.row.max', 'CMINMSGS row → msgx.msg read, max', 'ms', one(rowL.max), { better: 'lower' }),
        figure('cloud.api.p50', 'API send → msgx.msg read, p50', 'ms', one(apiL.p50), { better: 'lower' }),
        figure('cloud.api.p99', 'API send → msgx.msg read, p99', 'ms', one(apiL.p99), { target: { op: '<', value: 1000 }, headline: true }),
        figure('cloud.api.max', 'API send → msgx.msg read, max', 'ms', one(apiL.max), { better: 'lower' }),
        figure('cloud.api.answer.p99', 'API send answered (200), p99', 'ms', one(answerL.p99), { better: 'lower' }),
        figure('cloud.burst.drain', `burst of ${n(burst)} sends: first send → last record read`, 's', one(drained / 1000), {
          better: 'lower',
        }),
        ...ROLES.map((r) =>
          figure(`cloud.burst.invocations.${r}`, `burst: ${r} invocations`, 'count', one(perRole[r]!), { better: 'lower' }),
        ),
        figure('cloud.burst.lost', `burst: sends refused ${SEND_ATTEMPTS} times (5xx or 429)`, 'count', one(lost), {
          target: { op: '<', value: 1 },
        }),
        figure('cloud.burst.resent', 'burst and sends: attempts answered 5xx or 429 and sent again', 'count', one(refused.length), {
          better: 'lower',
        }),
        figure('cloud.burst.pg', 'burst: peak PostgreSQL connections (pg_stat_activity)', 'count', one(watch.pgPeak), { better: 'lower' }),
        figure('cloud.burst.mariadb', 'burst: peak MariaDB connections (processlist)', 'count', one(watch.mariadbPeak), {
          better: 'lower',
        }),
      ],
      notes,
      meta: {
        rows,
        rowSpacingMs: 1013,
        sends,
        sendSpacingMs: 250,
        burst,
        inFlight,
        clockFactor: 1,
        stageSettings: assembly.stageSettings ?? null,
        perRole,
        concurrent,
        environments: Object.fromEntries(envPeak),
        idleConnections: idle,
        burstAnsweredSeconds: answered / 1000,
        resent: refused.length,
        lost,
      },
    };
  } finally {
    await reader.stop();
    await owner.end().catch(() => {});
    await emu.stop();
    // A kept assembly's topics stay for the cloud tests that reuse it.
    if (!keep) {
      await deleteTopics(emu.kafka.brokers, Object.values(emu.kafka.topics));
      rmSync(dirname(assembly.outdir), { recursive: true, force: true });
    }
  }
}

/** A consumer of msgx.msg in a group of its own (read_committed): when each mailbox ID's first change event was read. */
class Reader {
  readonly readAt = new Map<number, number>();
  /** Records produced before this reader started (a kept assembly's topics, earlier runs' mailbox IDs) are not ours. */
  private readonly since = Date.now();
  private readonly kafka;
  private consumer?: kafkajs.Consumer;

  constructor(
    brokers: string[],
    private readonly topic: string,
  ) {
    this.kafka = new Kafka({ clientId: 'bench-cloud', brokers, logLevel: logLevel.NOTHING });
  }

  async start(): Promise<void> {
    this.consumer = this.kafka.consumer({ groupId: `bench-cloud-${Date.now().toString(36)}`, maxWaitTimeInMs: 20 });
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: this.topic, fromBeginning: true });
    await this.consumer.run({
      eachMessage: async ({ message }) => {
        const at = performance.now();
        if (Number(message.timestamp) < this.since) return;
        const v = message.value ? (JSON.parse(message.value.toString()) as { source?: { msgId?: number } }) : null;
        const id = Number(v?.source?.msgId);
        if (Number.isFinite(id) && !this.readAt.has(id)) this.readAt.set(id, at);
      },
    });
  }

  async wait(ids: number[], timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (ids.some((id) => !this.readAt.has(id))) {
      if (Date.now() > until) throw new Error(`${ids.filter((id) => !this.readAt.has(id)).length} of ${ids.length} records never read`);
      await sleep(20);
    }
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect().catch(() => {});
  }
}

/**
 * Peak PostgreSQL client connections (every user but the watcher's) and MariaDB connections
 * (every user but the watcher's), sampled every 100 ms on connections of its own; a failed sample
 * is counted and the connection opened again at the next one.
 */
class ConnectionWatch {
  pgPeak = 0;
  mariadbPeak = 0;
  failedSamples = 0;
  lastError = '';
  private pgClient?: pg.Client;
  private my?: mysql.Connection;
  private timer?: NodeJS.Timeout;
  private busy = false;

  constructor(
    private readonly superUrl: string,
    private readonly mariadbUrl: string,
  ) {}

  async start(): Promise<void> {
    await this.sample();
    this.timer = setInterval(() => void this.sample(), 100);
  }

  reset(): void {
    this.pgPeak = 0;
    this.mariadbPeak = 0;
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      if (!this.pgClient) {
        const c = new pg.Client({ connectionString: this.superUrl });
        c.on('error', () => (this.pgClient = undefined));
        await c.connect();
        this.pgClient = c;
      }
      const r = await this.pgClient.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND usename <> current_user`,
      );
      this.pgPeak = Math.max(this.pgPeak, Number(r.rows[0]!.n));
      if (!this.my) {
        const c = await mysql.createConnection({ uri: this.mariadbUrl });
        c.on('error', () => (this.my = undefined));
        this.my = c;
      }
      const [m] = await this.my.query<mysql.RowDataPacket[]>(
        `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Daemon'`,
      );
      this.mariadbPeak = Math.max(this.mariadbPeak, Number(m[0]!.n));
    } catch (err) {
      this.failedSamples++;
      this.lastError = (err as Error).message;
      await this.pgClient?.end().catch(() => {});
      this.my?.destroy();
      this.pgClient = undefined;
      this.my = undefined;
    } finally {
      this.busy = false;
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    while (this.busy) await sleep(10);
    await this.sample();
    await this.pgClient?.end().catch(() => {});
    this.my?.destroy();
  }
}

/** The most invocations of one function running at the same moment. */
function peakConcurrency(inv: { startedAt: number; endedAt?: number }[]): number {
  const edges = inv.flatMap((i) => [
    [i.startedAt, 1],
    [i.endedAt ?? Number.POSITIVE_INFINITY, -1],
  ]);
  edges.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let now = 0;
  let peak = 0;
  for (const [, d] of edges) peak = Math.max(peak, (now += d!));
  return peak;
}

async function waitUntil<T>(check: () => T | undefined, timeoutMs: number): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms`);
    await sleep(100);
  }
}

async function deleteTopics(brokers: string[], topics: string[]): Promise<void> {
  const admin = new Kafka({ clientId: 'bench-cloud-admin', brokers, logLevel: logLevel.NOTHING }).admin();
  try {
    await admin.connect();
    await admin.deleteTopics({ topics });
  } catch {
    // A reused assembly's topics may be gone already.
  } finally {
    await admin.disconnect().catch(() => {});
  }
}
