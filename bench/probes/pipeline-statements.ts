/**
 * What each stage of the inbound path costs per message, in counts a busy machine does not
 * change (bench/README.md "What each remaining statement buys"): the real ingress
 * (acceptInbound), the poller's and the pump's role steps and the back-fill, with the MariaDB mailbox, the
 * day plan of 2,000 flights and N FLOPs each changing its flight.
 *
 * - statements: every PostgreSQL statement a `pg` client sent (BEGIN, COMMIT and SAVEPOINT
 *   included) and every mailbox call, per message;
 * - round trips: the same, less statements sent while another of the same stage was in flight
 *   (they overlap; none here is pipelined on one connection);
 * - rows written: inserted, updated and deleted rows per table from pg_stat_user_tables (every
 *   pool connection is made to flush its counters first), and the mailbox rows written;
 * - NOTIFYs per message as a listener in another process hears them, per channel;
 * - on-CPU time per message (/proc/<pid>/schedstat) of this process and of the database's
 *   PostgreSQL backends: less sensitive to a busy machine than wall time, still noisy (compare
 *   trees by alternating runs). WAL is not counted: the server is shared with other databases.
 *
 * The poller and the pump run as their roles' steps (lib/jobs/roles.ts) until each would rest.
 * Two shapes: `drain` (N rows stored, then polled, then pumped: the backlog path, groups of
 * MSGX_GROUP_COMMIT) and `trickle` (each message stored, polled and pumped before the next: the
 * path of a send at 25/s, one message per poll and per group).
 *
 * The poller and the pump of the twin listen holding their locks, so the ingress and the poller
 * wake them in-process without a NOTIFY; MSGX_PROBE_CLOUD=1 counts the cloud's path instead.
 *
 *   [MSGX_PROBE_CLOUD=1] npx tsx bench/probes/pipeline-statements.ts [drain|trickle] [messages]
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import type { PgDb } from '../../lib/db/pg.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';
import { acceptInbound } from '../../lib/pipeline/ingress.ts';
import { MAILBOX_CHANNEL } from '../../lib/pipeline/poller.ts';
import { INBOX_CHANNEL } from '../../lib/pipeline/procState.ts';
import { pollerRole, pumpRole } from '../../lib/jobs/roles.ts';
import { benchContext, freshMysql, freshPg } from '../lib/env.ts';
import { flopText, loadPlan } from '../lib/workload.ts';

const MODE = process.argv[2] === 'trickle' ? 'trickle' : 'drain';
const N = Number(process.argv[3] ?? (MODE === 'drain' ? 2000 : 200));
const FLIGHTS = 2000;

type Stage = 'ingress' | 'poller' | 'pump' | 'backfill';
const STAGES: Stage[] = ['ingress', 'poller', 'pump', 'backfill'];
interface Count {
  statements: number;
  roundTrips: number;
  inFlight: number;
  mailboxRows: number;
  kinds: Map<string, number>;
}
const counts = new Map<Stage, Count>(
  STAGES.map((s) => [s, { statements: 0, roundTrips: 0, inFlight: 0, mailboxRows: 0, kinds: new Map() }]),
);
let stage: Stage | null = null;
// The back-fill runs inside the pump's step: its statements are told apart by what they do.
const stageOf = (sql: string): Stage | null => (stage === 'pump' && /^\s*DELETE FROM backfill_todo/.test(sql) ? 'backfill' : stage);

function count(s: Stage | null, kind: string): () => void {
  if (!s) return () => {};
  const c = counts.get(s)!;
  c.statements++;
  if (c.inFlight === 0) c.roundTrips++;
  c.inFlight++;
  c.kinds.set(kind, (c.kinds.get(kind) ?? 0) + 1);
  return () => void c.inFlight--;
}

// Every statement any `pg` client sends (pool queries and the transactions' own).
const clientQuery = pg.Client.prototype.query as (...a: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const a0 = args[0] as string | { text?: string };
  const text = typeof a0 === 'string' ? a0 : (a0?.text ?? '');
  const done = count(stageOf(text), `pg: ${text.replace(/\s+/g, ' ').trim().slice(0, 70)}`);
  const r = clientQuery.apply(this, args);
  if (r && typeof (r as Promise<unknown>).then === 'function') (r as Promise<unknown>).then(done, done);
  else done();
  return r;
} as typeof pg.Client.prototype.query;

const pgDb = await freshPg();
const my = await freshMysql();
const mailbox = new MysqlMailbox(my.url);
for (const m of ['insertInbound', 'scanIds', 'readRanges', 'readTexts', 'markProcessed', 'scanUnprocessed'] as const) {
  const f = (mailbox[m] as (...a: unknown[]) => Promise<unknown>).bind(mailbox);
  (mailbox as unknown as Record<string, unknown>)[m] = async (...a: unknown[]) => {
    if (m === 'readRanges' && (a[0] as unknown[]).length === 0) return f(...a); // no statement sent
    const s = m === 'markProcessed' ? (stage ? 'backfill' : null) : stage;
    const done = count(s, `mailbox: ${m}`);
    if (s && (m === 'insertInbound' || m === 'markProcessed'))
      counts.get(s)!.mailboxRows += m === 'insertInbound' ? 1 : (a[0] as unknown[]).length;
    try {
      return await f(...a);
    } finally {
      done();
    }
  };
}
const ctx = benchContext({ db: pgDb.db, mailbox, env: { MSGX_GROUP_COMMIT: process.env.MSGX_GROUP_COMMIT ?? '50' } });
await mailbox.markColumns();
await loadPlan(ctx, mailbox, FLIGHTS);
// The twin's poller worker listens while it holds the poller's lock (lib/jobs/worker.ts); the
// ingress of that process then wakes it without a NOTIFY. MSGX_PROBE_CLOUD=1: the cloud's ingress
// and poller, each role in a function of its own. The same for the poller's wake of the pump.
if (!process.env.MSGX_PROBE_CLOUD) {
  await pgDb.db.listen(MAILBOX_CHANNEL, () => {}, { holdsRoleLock: true });
  await pgDb.db.listen(INBOX_CHANNEL, () => {}, { holdsRoleLock: true });
}

const admin = new pg.Client({ connectionString: pgDb.url });
await admin.connect();
const pool = (pgDb.db as PgDb).pool;

const onCpuNs = (pid: number | 'self'): number | null => {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return null;
  }
};
// NOTIFYs as another process hears them: each is work for the server at commit and for every listener.
const ear = new pg.Client({ connectionString: pgDb.url });
await ear.connect();
let heard = new Map<string, number>();
ear.on('notification', (n) => heard.set(n.channel, (heard.get(n.channel) ?? 0) + 1));
for (const c of [MAILBOX_CHANNEL, INBOX_CHANNEL, 'msgx_outbox']) await ear.query(`LISTEN ${c}`);
const adminPid = (await admin.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
const earPid = (await ear.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
const dbName = new URL(pgDb.url).pathname.slice(1);
/** On-CPU ns of this process and of the database's backends (a backend gone since keeps what it had). */
let cpuSeen = new Map<number, number>();
async function cpuNow(): Promise<{ self: number; pg: number }> {
  const r = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> ALL($2::int[])`, [
    dbName,
    [adminPid, earPid],
  ]);
  const seen = new Map(cpuSeen);
  for (const { pid } of r.rows) seen.set(pid, onCpuNs(pid) ?? seen.get(pid) ?? 0);
  cpuSeen = seen;
  return { self: onCpuNs('self') ?? 0, pg: [...seen.values()].reduce((a, b) => a + b, 0) };
}

/** Rows written per table since the last call, and the CPU spent. */
let lastRows = new Map<string, number>();
let lastCpu = { self: 0, pg: 0 };
async function snapshot(): Promise<{ rows: Map<string, number>; cpu: { self: number; pg: number }; notifies: Map<string, number> }> {
  const c = await cpuNow();
  const cpu = { self: c.self - lastCpu.self, pg: c.pg - lastCpu.pg };
  // Each connection's counters reach the shared stats when it next goes idle after this.
  const clients = await Promise.all(Array.from({ length: pool.totalCount }, () => pool.connect()));
  await Promise.all(clients.map((cl) => clientQuery.call(cl, 'SELECT pg_stat_force_next_flush()')));
  clients.forEach((cl) => cl.release());
  await new Promise((r) => setTimeout(r, 300));
  await admin.query('SELECT pg_stat_clear_snapshot()');
  const r = await admin.query<{ relname: string; n: string }>(
    `SELECT relname, (n_tup_ins + n_tup_upd + n_tup_del)::text AS n FROM pg_stat_user_tables`,
  );
  const now = new Map(r.rows.map((x) => [x.relname, Number(x.n)]));
  const rows = new Map([...now].map(([t, n]) => [t, n - (lastRows.get(t) ?? 0)] as [string, number]).filter(([, n]) => n > 0));
  lastRows = now;
  lastCpu = await cpuNow();
  const notifies = heard;
  heard = new Map();
  return { rows, cpu, notifies };
}

const rowsBy = new Map<string, Map<string, number>>();
const cpuBy = new Map<string, { self: number; pg: number }>();
const notifiesBy = new Map<string, Map<string, number>>();
await snapshot();
const texts = Array.from({ length: N }, (_, i) => flopText(i, FLIGHTS));
// The roles' own steps, as their workers run them until they rest.
const pump = pumpRole(ctx);
const poller = pollerRole(ctx);
const untilRest = async (role: { step: () => Promise<{ busy: boolean }> }) => {
  while ((await role.step()).busy);
};
if (MODE === 'drain') {
  stage = 'ingress';
  for (const t of texts) await acceptInbound(ctx, t, 'application/xml');
  stage = null;
  let s = await snapshot();
  rowsBy.set('ingress', s.rows);
  cpuBy.set('ingress', s.cpu);
  notifiesBy.set('ingress', s.notifies);
  stage = 'poller';
  await untilRest(poller);
  stage = null;
  s = await snapshot();
  rowsBy.set('poller', s.rows);
  cpuBy.set('poller', s.cpu);
  notifiesBy.set('poller', s.notifies);
  stage = 'pump';
  await untilRest(pump);
  stage = null;
  s = await snapshot();
  rowsBy.set('pump+backfill', s.rows);
  cpuBy.set('pump+backfill', s.cpu);
  notifiesBy.set('pump+backfill', s.notifies);
} else {
  for (const t of texts) {
    stage = 'ingress';
    await acceptInbound(ctx, t, 'application/xml');
    stage = 'poller';
    await untilRest(poller);
    stage = 'pump';
    await untilRest(pump);
    stage = null;
  }
  const s = await snapshot();
  rowsBy.set('all', s.rows);
  cpuBy.set('all', s.cpu);
  notifiesBy.set('all', s.notifies);
}
const open = await pgDb.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM proc_state WHERE status <> 'SUCCEEDED'`);
const unprocessed = await mailbox.scanUnprocessed(0, 10);
if (open.rows[0]!.n !== 0 || unprocessed.length !== 0) throw new Error('not every message succeeded and was back-filled');

const per = (n: number) => (n / N).toFixed(2);
console.log(`${MODE}, ${N} FLOPs, MariaDB mailbox, groups of ${ctx.config.pipeline.groupCommit}`);
console.log('stage      statements/msg  round trips/msg  mailbox rows/msg');
for (const s of STAGES) {
  const c = counts.get(s)!;
  console.log(`${s.padEnd(10)} ${per(c.statements).padStart(14)} ${per(c.roundTrips).padStart(16)} ${per(c.mailboxRows).padStart(17)}`);
}
console.log('\nPostgreSQL rows written per message (inserted + updated + deleted); on-CPU µs per message (this process, PostgreSQL):');
for (const [s, rows] of rowsBy) {
  const total = [...rows.values()].reduce((a, b) => a + b, 0);
  const detail = [...rows]
    .sort((a, b) => b[1] - a[1])
    .map(([t, n]) => `${t} ${per(n)}`)
    .join(', ');
  const cpu = cpuBy.get(s)!;
  const us = (ns: number) => Math.round(ns / 1000 / N);
  const notifies = [...notifiesBy.get(s)!].map(([c, n]) => `${c} ${per(n)}`).join(', ') || 'none';
  console.log(`${s.padEnd(14)} ${per(total).padStart(6)}  cpu ${us(cpu.self)} + ${us(cpu.pg)} µs   (${detail})   NOTIFYs: ${notifies}`);
}
console.log('\nstatements per message by kind:');
for (const s of STAGES)
  for (const [k, n] of [...counts.get(s)!.kinds].sort((a, b) => b[1] - a[1])) console.log(`${s.padEnd(10)} ${per(n).padStart(6)}  ${k}`);
await admin.end();
await ear.end();
await mailbox.close();
await my.drop();
await pgDb.drop();
process.exit(0);
