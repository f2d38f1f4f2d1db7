import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import mysql from 'mysql2/promise';
import { bundleFunction } from '../../infra-cdk/bundle.ts';
import { FUNCTION_ROLES, type FunctionRole } from '../../lib/app/catalogue.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';
import { ensureTopics } from '../../lib/outbox/topics.ts';
import { benchContext, freshMysql, freshPg, randomName, serviceUrls } from '../lib/env.ts';
import { embeddedStart } from '../lib/embedded.ts';
import { progress } from '../lib/progress.ts';
import { figure, type Figure, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { median, sleep } from '../lib/stats.ts';
import { bulkInsertMailbox, flopText, loadPlan } from '../lib/workload.ts';
import { FLIGHTS } from './pump.ts';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..', '..');
const out = join(root, 'bench', '.out');

// The CDK's bundling, exactly (infra-cdk/bundle.ts: node22, without the twin's code).
async function bundle(fn: FunctionRole): Promise<string> {
  const outdir = join(out, 'fn', fn);
  await bundleFunction({ repoRoot: root, fn, outdir, target: 'node22', sourcemap: false });
  return join(outdir, 'index.mjs');
}

/** A fresh `node` importing the bundle: ms from before the import to after it. */
async function coldImport(file: string): Promise<number> {
  const code = `const t = performance.now(); await import(${JSON.stringify(file)}); process.stdout.write(String(performance.now() - t)); process.exit(0);`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], { cwd: out, env: { PATH: process.env.PATH ?? '' } });
  return Number(stdout);
}

function vm(pid: number, key: 'VmHWM' | 'VmRSS'): number {
  const m = new RegExp(`${key}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** Runs a function bundle's handler in a child (as Lambda would) until `done()`; returns its VmHWM in MiB. */
async function peakRss(
  file: string,
  env: Record<string, string>,
  done: () => Promise<boolean>,
  maxMs: number,
  ingressEvents = 0,
): Promise<number> {
  const runner = join(out, 'invoke.mjs');
  const child: ChildProcess = spawn(process.execPath, [runner, file, String(ingressEvents)], {
    cwd: out,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const deadline = Date.now() + maxMs;
  let hwm = 0;
  try {
    while (Date.now() < deadline) {
      if (child.exitCode !== null) {
        if (child.exitCode !== 0) throw new Error(`${file} exited ${child.exitCode}: ${stderr}`);
        break;
      }
      hwm = Math.max(hwm, vm(child.pid!, 'VmHWM'));
      if (await done()) {
        hwm = Math.max(hwm, vm(child.pid!, 'VmHWM'));
        return hwm;
      }
      await sleep(100);
    }
    if (child.exitCode === null) throw new Error(`${file}: backlog not done within ${maxMs} ms; its stderr ends: ${stderr.slice(-300)}`);
    return hwm;
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
  }
}

// The Lambda runtime, minimally: import the bundle, call the handler with a remaining time.
const INVOKE = `
const [file, ingressEvents] = process.argv.slice(2);
const { handler } = await import(file);
const n = Number(ingressEvents);
if (n > 0) {
  for (let i = 0; i < n; i++) {
    const body = '<MSG><META><SNDR>FIMS</SNDR><RCVR>MSGX</RCVR><SEQN>' + (500000 + i) + '</SEQN><TYPE>FLOP</TYPE><STYP>ETOT</STYP></META><FLOP><FLIGHT><FLID>100001</FLID><ETOT>20261129101500</ETOT></FLIGHT></FLOP></MSG>';
    const r = await handler({ httpMethod: 'POST', path: '/cminmsgs/send', headers: { 'content-type': 'application/xml' }, body, isBase64Encoded: false, queryStringParameters: null, requestContext: {} });
    if (r.statusCode !== 200) { process.stderr.write('ingress ' + r.statusCode + ' ' + r.body + '\\n'); process.exit(3); }
  }
  process.stderr.write('ingress done\\n');
  setInterval(() => {}, 1000);
} else {
  await handler({}, { getRemainingTimeInMillis: () => 130000 });
}
`;

export async function footprintScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('footprint');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'invoke.mjs'), INVOKE);
  const fns = [...FUNCTION_ROLES].sort();
  const figures: Figure[] = [];
  const files = new Map<string, string>();
  const sizes: Record<string, { bytes: number; gzip: number }> = {};
  for (const fn of fns) {
    const file = await bundle(fn);
    files.set(fn, file);
    const bytes = statSync(file).size;
    sizes[fn] = { bytes, gzip: gzipSync(readFileSync(file)).length };
    figures.push(figure(`footprint.bundle.${fn}`, `bundle ${fn} (minified)`, 'KiB', [bytes / 1024], { better: 'lower' }));
  }
  p.step('', `bundled ${fns.length} functions`);
  const imports = o.quick ? 3 : 5;
  for (const fn of fns) {
    const times: number[] = [];
    for (let i = 0; i < imports; i++) times.push(await coldImport(files.get(fn)!));
    figures.push(
      figure(`footprint.import.${fn}`, `cold import ${fn} (median of ${imports})`, 'ms', [median(times)], {
        better: 'lower',
        note: `runs ${times.map((t) => t.toFixed(0)).join(', ')}`,
      }),
    );
    p.step('import', `${fn}: ${median(times).toFixed(0)} ms`);
  }

  // Peak RSS of each function's loop at a backlog.
  const backlog = o.quick ? 2000 : 10_000;
  const pg = await freshPg();
  const my = await freshMysql();
  const mailbox = new MysqlMailbox(my.url);
  const env = {
    MSGX_PG_URL: pg.url,
    MSGX_MAILBOX_URL: my.url,
    MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
    MSGX_TOPIC_MSG: randomName('bench.msg'),
    MSGX_TOPIC_SCHD: randomName('bench.schd'),
    // A deployment's own offsets topic, as its msg and schd: a shared one grows with every run.
    MSGX_TOPIC_OFFSETS: randomName('bench.offsets'),
    MSGX_LOG_LEVEL: 'ERROR',
  };
  const rss: Record<string, number> = {};
  try {
    const ctx = benchContext({ db: pg.db, mailbox, env });
    await ensureTopics(ctx.config);
    await loadPlan(ctx, mailbox, FLIGHTS);
    await bulkInsertMailbox(
      { kind: 'mysql', url: my.url },
      Array.from({ length: backlog }, (_, i) => flopText(i, FLIGHTS)),
    );
    const q = async (sql: string) => (await pg.db.query<{ n: number }>(sql)).rows[0]!.n;
    const open = () => q(`SELECT count(*)::int AS n FROM proc_state WHERE status IN ('PENDING','FAILED')`);
    p.step('rss', `${backlog} FLOPs in the mailbox`);
    rss.poller = await peakRss(files.get('poller')!, env, async () => (await open()) >= backlog, 120_000);
    p.step('rss', `poller ${rss.poller.toFixed(0)} MiB (enqueued ${backlog})`);
    rss.pump = await peakRss(files.get('pump')!, env, async () => (await open()) === 0, 300_000);
    p.step('rss', `pump ${rss.pump.toFixed(0)} MiB (drained ${backlog})`);
    const pendingMsg = () =>
      q(
        `SELECT count(*)::int AS n FROM msg_event WHERE target = 'msg' AND msgx_event_state(status, target, event_id, writer_xid, now()) <> 'SENT'`,
      );
    const events = await q(`SELECT count(*)::int AS n FROM msg_event`);
    rss.dispatcher = await peakRss(files.get('dispatcher')!, env, async () => (await pendingMsg()) === 0, 300_000);
    p.step('rss', `dispatcher ${rss.dispatcher.toFixed(0)} MiB (${events} events queued)`);
    const sweepUntil = Date.now() + 5000;
    rss.sweep = await peakRss(files.get('sweep')!, env, async () => Date.now() > sweepUntil, 30_000);
    p.step('rss', `sweep ${rss.sweep.toFixed(0)} MiB (5 s)`);
    // The ingress stores each message in the mailbox and wakes the poller (which is not running
    // here): its work is done when the mailbox holds every request.
    const mailboxRows = async () => {
      const conn = await mysql.createConnection(my.url);
      try {
        const [rows] = await conn.query<mysql.RowDataPacket[]>('SELECT count(*) AS n FROM CMINMSGS');
        return Number(rows[0]!.n);
      } finally {
        await conn.end();
      }
    };
    const before = await mailboxRows();
    const ingressN = o.quick ? 200 : 1000;
    rss.ingress = await peakRss(files.get('ingress')!, env, async () => (await mailboxRows()) >= before + ingressN, 120_000, ingressN);
    p.step('rss', `ingress ${rss.ingress.toFixed(0)} MiB (${ingressN} requests)`);
    for (const [fn, mib] of Object.entries(rss))
      figures.push(figure(`footprint.rss.${fn}`, `peak RSS ${fn} (VmHWM)`, 'MiB', [mib], { better: 'lower' }));
    await mailbox.close();
  } finally {
    await my.drop();
    await pg.drop();
  }
  // The embedded twin (`npm start` with nothing set): resident memory once it answers.
  const starts = { firstRss: [] as number[], firstPeak: [] as number[], againRss: [] as number[], againPeak: [] as number[] };
  for (let r = 0; r < (o.quick ? 1 : o.runs); r++) {
    const e = await embeddedStart();
    for (const k of Object.keys(starts) as (keyof typeof starts)[]) starts[k].push(e[k]);
    p.step(
      'twin',
      `embedded twin: first start ${e.firstRss.toFixed(0)} MiB (peak ${e.firstPeak.toFixed(0)}), again ${e.againRss.toFixed(0)} MiB (peak ${e.againPeak.toFixed(0)})`,
    );
  }
  figures.push(
    figure('footprint.twin.embedded.rss', 'embedded twin RSS after start (fresh .msgx, VmRSS)', 'MiB', starts.firstRss, {
      target: { op: '<', value: 300 },
      headline: true,
    }),
    figure('footprint.twin.embedded.peak', 'embedded twin peak RSS during start (VmHWM)', 'MiB', starts.firstPeak, { better: 'lower' }),
    figure('footprint.twin.embedded.restart.rss', 'embedded twin RSS after a restart on the same .msgx', 'MiB', starts.againRss, {
      target: { op: '<', value: 300 },
    }),
  );
  return {
    scenario: 'footprint',
    title: 'Footprint per function: bundle, cold import, peak RSS at a backlog',
    figures,
    notes: [
      'embedded twin: lib/twin/main.ts with MSGX_PG_URL, MSGX_MAILBOX_URL and MSGX_KAFKA_BROKERS unset on a fresh data directory, VmRSS one second after /health first answers 200 (every role running); then stopped and started again on the same directory.',
      `peak RSS: each bundle's handler in its own node process (getRemainingTimeInMillis 130 s), VmHWM once the backlog is done: poller enqueues ${backlog} mailbox rows, pump drains them, dispatcher sends their events, sweep runs 5 s, ingress handles ${o.quick ? 200 : 1000} API Gateway events.`,
    ],
    meta: { sizes, backlog },
  };
}
