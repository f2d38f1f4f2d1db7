/**
 * Shared machinery of the fault runs: a fresh PostgreSQL database, MariaDB mailbox and pair of
 * Kafka topics per run (the mailbox and the topics on the run's PRIVATE MariaDB and broker,
 * globalSetup.ts); the real roles as child processes that can be SIGKILLed and restarted; a
 * flight workload whose every outcome is known in advance; and the invariant checker that only
 * reads PostgreSQL, the mailbox and both topics back (it never repairs what it checks).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import mysql from 'mysql2/promise';
import { inject } from 'vitest';
import type { ScheduledRole } from '../../lib/app/catalogue.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { flightJson } from '../../lib/flights/json.ts';
import { readFlightsOfDay } from '../../lib/flights/store.ts';
import { buildRouter } from '../../lib/http/app.ts';
import { startHttpServer } from '../../lib/http/node.ts';
import { ensureTopics } from '../../lib/outbox/topics.ts';
import type { OrderingStats } from '../../lib/pipeline/frontier.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import type { MessageTrace } from '../../lib/observability/trace.ts';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { readTopicToEnd } from '../helpers/kafka.ts';
import { rng } from '../helpers/rng.ts';
import { makeContext } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, serviceUrls, type TestMysql, type TestPg } from '../helpers/services.ts';
import { keepEvidence, note } from './evidence.ts';
import { kafkaStart, kafkaStop, mariadbStart, mariadbStop } from './privateServices.ts';

export { note } from './evidence.ts';

export const DAY = '20261129';
/** A role the harness can run and kill: any scheduled role of the catalogue. */
export type RoleName = ScheduledRole;

/** Settings every fault run uses: short leases and periods so a 5-minute budget covers 50+ kills. */
export const FAULT_ENV: Record<string, string> = {
  // INFO into each role's log file: a failing run shows what every role did, not only its errors.
  MSGX_LOG_LEVEL: 'INFO',
  MSGX_POLL_INTERVAL_MS: '200',
  MSGX_TOPIC_PARTITIONS: '3',
  // A killed dispatcher's lease expires after this: its rows are re-sent (duplicates, same event id).
  MSGX_DELIVERY_LEASE: '4s',
  MSGX_DELIVERY_PUBLISH_TIMEOUT: '2s',
  MSGX_DELIVERY_POLL_INTERVAL: '200ms',
  MSGX_SCHD_FLUSH_PERIOD: '500ms',
  // The sweep role retries back-fills a killed pump or a mailbox outage left behind; with the
  // defaults (30 s doubling to 15 min) a run would wait minutes for the last mark.
  MSGX_BACKFILL_INITIAL: '1s',
  MSGX_BACKFILL_MAX: '4s',
};

export interface FaultRun {
  pg: TestPg;
  my: TestMysql;
  brokers: string[];
  topicMsg: string;
  topicSchd: string;
  env: Record<string, string>;
  logDir: string;
  /** A query on a fresh connection (the test's own long-lived connection dies with a MariaDB restart). */
  mailboxQuery<T = mysql.RowDataPacket[]>(sql: string, params?: unknown[]): Promise<T>;
  /** Every invariant report checkInvariants made on this run (the evidence of a failure keeps them). */
  reports: InvariantReport[];
  /**
   * The run's invariant check as its test would make it (set by the test once its workload
   * exists): a test that failed before checking gets it run when its evidence is kept.
   */
  check?: () => Promise<InvariantReport>;
  /**
   * Keeps the evidence of a failed test (evidence.ts): timeline, violations, role failures and
   * logs, service logs, table dumps; afterwards drop() keeps both databases. Returns its directory.
   */
  keepEvidence(test: string, failures: unknown[], errors?: string[]): Promise<string>;
  /** Whether the evidence of a failure was kept (then drop() keeps both databases). */
  readonly kept: boolean;
  /** Removes both databases, unless the evidence of a failure was kept. */
  drop(): Promise<void>;
}

async function onFreshConnection<T>(url: string, fn: (c: mysql.Connection) => Promise<T>): Promise<T> {
  const c = await mysql.createConnection({ uri: url, timezone: 'Z' });
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => {});
  }
}

export async function setupRun(name: string, extraEnv: Record<string, string> = {}): Promise<FaultRun> {
  const pg = await freshPg();
  const my = await freshMysql();
  const { kafkaBrokers } = serviceUrls();
  const tag = `${Date.now().toString(36)}.${randomBytes(3).toString('hex')}`;
  const topicMsg = `msgx-faults.${name}.msg.${tag}`;
  const topicSchd = `msgx-faults.${name}.schd.${tag}`;
  const env: Record<string, string> = {
    ...FAULT_ENV,
    MSGX_PG_URL: pg.url,
    MSGX_MAILBOX_URL: my.url,
    MSGX_KAFKA_BROKERS: kafkaBrokers.join(','),
    MSGX_TOPIC_MSG: topicMsg,
    MSGX_TOPIC_SCHD: topicSchd,
    ...extraEnv,
  };
  const config = loadConfig({ ...env, MSGX_RUNTIME: 'twin' });
  await ensureTopics(config);
  const logDir = join(tmpdir(), `msgx-faults-${name}-${tag}`);
  mkdirSync(logDir, { recursive: true });
  let kept = false;
  const mailboxQuery = async <T>(sql: string, params: unknown[] = []) =>
    onFreshConnection(my.url, async (c) => (await c.query(sql, params))[0] as T);
  const reports: InvariantReport[] = [];
  note(`run ${name}: PostgreSQL ${pg.url}, mailbox ${my.url}, topics ${topicMsg} ${topicSchd}, role logs ${logDir}`);
  const self: FaultRun = {
    pg,
    my,
    brokers: kafkaBrokers,
    topicMsg,
    topicSchd,
    env,
    logDir,
    mailboxQuery,
    reports,
    get kept() {
      return kept;
    },
    async keepEvidence(test, failures, errors = []) {
      kept = true;
      const check = self.check;
      return keepEvidence(
        {
          name,
          pgUrl: pg.url,
          pgQuery: async (sql) => (await pg.db.query<Record<string, unknown>>(sql)).rows,
          mailboxUrl: my.url,
          mailboxQuery: (sql) => mailboxQuery<Record<string, unknown>[]>(sql),
          logDir,
          violations: reports.flatMap((r) => r.all),
          check: reports.length === 0 && check ? async () => (await check()).all : undefined,
          failures,
          errors,
        },
        test,
      );
    },
    async drop() {
      if (kept) {
        await pg.db.close().catch(() => {});
        return;
      }
      await my.drop().catch(async () => {
        const db = new URL(my.url).pathname.slice(1);
        await onFreshConnection(serviceUrls().mailboxUrl, (c) => c.query(`DROP DATABASE IF EXISTS \`${db}\``)).catch(() => {});
      });
      await pg.drop().catch(() => {});
    },
  };
  return self;
}

/**
 * afterEach of every fault test file: a failed test keeps its evidence, and the directory is named
 * in the test's own failure report (this hook's error is added to the test's errors), not only in
 * the run's stderr.
 */
export async function keepEvidenceOnFailure(
  task: { name: string; result?: { state?: string; errors?: { message?: string }[] } },
  run: FaultRun | undefined,
  roles: RoleProcesses | undefined,
): Promise<void> {
  if (task.result?.state !== 'fail' || !run) return;
  const errors = (task.result.errors ?? []).map((e) => e.message ?? String(e));
  const dir = await run.keepEvidence(task.name, roles?.allFailures() ?? [], errors);
  throw new Error(`evidence of this failure kept in ${dir} (README.txt there names the kept databases and service directories)`);
}

interface TaskLike {
  name: string;
  result?: { state?: string; errors?: { message?: string }[] };
  tasks?: TaskLike[];
}
const failedIn = (t: TaskLike): boolean => t.result?.state === 'fail' || (t.tasks ?? []).some(failedIn);

/**
 * afterAll of every fault test file: stops the roles, and when anything in the file failed — a
 * test, or the file's own setup (then no afterEach ran) — keeps the evidence if no test did, and
 * leaves both databases in place; otherwise drops them.
 */
export async function finishRun(suite: TaskLike, run: FaultRun | undefined, roles: RoleProcesses | undefined): Promise<void> {
  await roles?.stopAll();
  let dir: string | undefined;
  if (run && !run.kept && failedIn(suite)) {
    const errors = (suite.result?.errors ?? []).map((e) => e.message ?? String(e));
    dir = await run.keepEvidence(`${suite.name} (setup of the file)`, roles?.allFailures() ?? [], errors);
  }
  await run?.drop();
  if (dir) throw new Error(`evidence of this failure kept in ${dir} (README.txt there names the kept databases and service directories)`);
}

// ---- Roles in child processes ---------------------------------------------------------------

interface Child {
  role: RoleName;
  proc: ChildProcess;
  exited: Promise<void>;
  killed?: boolean;
}

/** A failure a role child reported (roleChild.ts prints `failure <json>` for each). */
export interface RoleFailure {
  role: RoleName;
  at: number;
  message: string;
  detail: string;
}

/** A period in which the scenario itself breaks things (a killed service), plus its grace. */
interface FaultWindow {
  name: string;
  from: number;
  to: number;
}

/** After a fault ends, failures are still the fault's for this long (clients reconnecting). */
export const FAULT_GRACE_MS = 5_000;

/** Keeps one child process per role running; kill() SIGKILLs one and starts its successor. */
export class RoleProcesses {
  readonly #run: FaultRun;
  readonly #children = new Map<RoleName, Child>();
  #spawned = 0;
  #stopping = false;
  kills: { role: RoleName; at: number }[] = [];
  /**
   * Children that died without being killed (a crash: an unhandled error took the process down).
   * They are restarted as the schedule would invoke the function again, and the tests assert that
   * this list stays empty.
   */
  crashes: { role: RoleName; code: number | null; at: number; error: string }[] = [];
  /** Every failure any child logged (errors, lost lock sessions, unhandled rejections). */
  failures: RoleFailure[] = [];
  readonly #windows: FaultWindow[] = [];

  constructor(run: FaultRun) {
    this.#run = run;
  }

  /**
   * Runs `fault` as a period in which role failures are expected: from its start until
   * FAULT_GRACE_MS after it returns. Failures outside every such period fail the run.
   */
  async duringFault<T>(name: string, fault: () => Promise<T>): Promise<T> {
    const w: FaultWindow = { name, from: Date.now(), to: Number.POSITIVE_INFINITY };
    this.#windows.push(w);
    note(`fault window opens: ${name}`);
    try {
      return await fault();
    } finally {
      w.to = Date.now() + FAULT_GRACE_MS;
      note(`fault over: ${name}; failures excused until ${new Date(w.to).toISOString()}`);
    }
  }

  /** Every failure logged, each marked whether a fault window excuses it (for the evidence). */
  allFailures(): (RoleFailure & { excused: boolean; time: string })[] {
    return this.failures.map((f) => ({
      ...f,
      time: new Date(f.at).toISOString(),
      excused: this.#windows.some((w) => f.at >= w.from && f.at <= w.to),
    }));
  }

  /** The pid of the role's running child, if one runs. */
  pid(role: RoleName): number | undefined {
    return this.#children.get(role)?.proc.pid;
  }

  /** Failures no fault window explains, as one line each (empty when the run was clean). */
  unexplainedFailures(since = 0): string[] {
    return this.failures
      .filter((f) => f.at >= since && !this.#windows.some((w) => f.at >= w.from && f.at <= w.to))
      .map((f) => `${new Date(f.at).toISOString()} ${f.role}: ${f.message} — ${f.detail}`);
  }

  /** Starts the role; resolves once the child printed its `started` line. */
  async start(role: RoleName): Promise<void> {
    const logFile = join(this.#run.logDir, `${role}.${++this.#spawned}.log`);
    const log = openSync(logFile, 'a');
    const proc = spawn(process.execPath, ['--import', 'tsx', 'test/faults/roleChild.ts', role], {
      env: { ...process.env, ...this.#run.env },
      stdio: ['ignore', 'pipe', log],
    });
    closeSync(log);
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    const child: Child = { role, proc, exited };
    this.#children.set(role, child);
    note(`${role} started (pid ${proc.pid}, log ${logFile})`);
    proc.once('exit', (code) => {
      if (this.#stopping || child.killed || this.#children.get(role) !== child) return; // killed by us
      this.#children.delete(role);
      const text = readFileSync(logFile, 'utf8');
      const error = text
        .split('\n')
        .filter((l) => /Error|error/.test(l) && !l.startsWith('{'))
        .slice(0, 3)
        .join(' | ');
      this.crashes.push({ role, code, at: Date.now(), error: `${error} (log ${logFile})` });
      note(`${role} (pid ${proc.pid}) CRASHED with code ${code}: ${error}`);
      setTimeout(() => {
        if (!this.#stopping && !this.#children.has(role)) void this.start(role).catch(() => {});
      }, 1000);
    });
    const lines = createInterface({ input: proc.stdout! });
    await new Promise<void>((resolve, reject) => {
      lines.on('line', (line) => {
        if (line.startsWith('started ')) resolve();
        else if (line.startsWith('failure ')) {
          const f = JSON.parse(line.slice('failure '.length)) as Omit<RoleFailure, 'detail'> & { detail: string };
          this.failures.push({ ...f, role });
          note(`${role} logged a failure: ${f.message} — ${f.detail}`);
        }
      });
      void exited.then(() => reject(new Error(`${role} child exited before starting (logs in ${this.#run.logDir})`)));
    });
  }

  /** SIGKILL, wait for the exit, start a successor (as a schedule would invoke the function again). */
  async kill(role: RoleName, restart = true): Promise<void> {
    const c = this.#children.get(role);
    if (c) {
      c.killed = true;
      c.proc.kill('SIGKILL');
      await c.exited;
      this.#children.delete(role);
      this.kills.push({ role, at: Date.now() });
      note(`${role} (pid ${c.proc.pid}) SIGKILLed`);
    }
    if (restart) await this.start(role);
  }

  async stopAll(): Promise<void> {
    this.#stopping = true;
    const all = [...this.#children.values()];
    this.#children.clear();
    for (const c of all) c.proc.kill('SIGKILL');
    await Promise.all(all.map((c) => c.exited));
  }

  get logDir(): string {
    return this.#run.logDir;
  }
}

// ---- The workload -------------------------------------------------------------------------------

export { rng };

const pad = (n: number, w: number) => String(n).padStart(w, '0');
/** A wire time on DAY, `i` seconds after 06:00 (unique per i below 18 hours). */
const timeAt = (i: number) => {
  const s = 6 * 3600 + (i % 64_800);
  return `${DAY}${pad(Math.floor(s / 3600), 2)}${pad(Math.floor(s / 60) % 60, 2)}${pad(s % 60, 2)}`;
};

/** What one message sets on its flight, as the read API shows it (the flight model's input). */
export interface Flop {
  flid: string;
  text: string;
  fields: Record<string, unknown>;
}

/**
 * A mailbox insert another system keeps open on a connection of its own: its ID is handed out at
 * the INSERT (MariaDB, like PostgreSQL, numbers rows before they commit), so every row inserted
 * after it leaves a gap at this ID until the transaction commits (late) or rolls back (a hole).
 */
export interface HeldInsert {
  id: number;
  flop: Flop;
  conn: mysql.Connection;
  heldAt: number;
}

/** Fields of the flight model and their value when nothing set them (collections are shown empty). */
const MODEL_FIELDS: Record<string, unknown> = {
  AWCD: undefined,
  FLNO: undefined,
  STAT: undefined,
  ETOT: undefined,
  ATOT: undefined,
  XREM: undefined,
  GATE: [],
  STND: [],
};

/**
 * A day plan and FLOPs whose outcomes are all known: every FLOP carries a value never seen before
 * (a unique time or remark), so each one changes its flight and bumps its state version by exactly
 * one. The model keeps, per FLID, the mailbox IDs of the committed messages that changed it in
 * mailbox-ID order (the order msgx must apply them in, whatever order the inserts returned in), and
 * what each message sets, so the final state of every flight can be computed without msgx.
 *
 * Held inserts (hold/commitHeld/rollbackHeld) are FLOP/ATOT on flights no other held insert uses;
 * no other message sets ATOT. A held row that commits after msgx gave its ID up is applied late,
 * after newer messages of its flight (docs/ordering.md "Holes and late rows"); since nothing else
 * touches ATOT, the state is still the one applying the committed messages in ID order gives.
 */
export class FlightWorkload {
  readonly flids: string[];
  readonly #rand: () => number;
  readonly #heldRand: () => number;
  #seqn = 0;
  #n = 0;
  /** FLID → mailbox IDs of the committed messages that made versions 1..n, in mailbox-ID order. */
  readonly versions = new Map<string, number[]>();
  /** Every committed message, in the order the test wrote or committed it. */
  readonly ids: number[] = [];
  /** Mailbox ID → what the message sets (the day plan's fields are in `#planFields`). */
  readonly changes = new Map<number, Flop>();
  /** IDs of held inserts the test rolled back: holes that never fill. */
  readonly rolledBack: number[] = [];
  readonly #heldFlids = new Set<string>();
  readonly #planFields = new Map<string, Record<string, unknown>>();

  constructor(
    flights: number,
    seed: number,
    readonly prefix = 'F',
  ) {
    this.flids = Array.from({ length: flights }, (_, i) => `${prefix}${pad(i + 1, 4)}`);
    this.#rand = rng(seed);
    this.#heldRand = rng(seed + 1);
  }

  planText(): string {
    return schd('DNLD', {
      seqn: `${this.prefix}plan`,
      dttm: `${DAY}050000`,
      opdy: DAY,
      flights: this.flids.map((id) => flight({ FLID: id, OPDY: DAY, AWCD: 'CZ', FLNO: id.slice(-4), STAT: 'SCH' })),
    });
  }

  nextFlop(): Flop {
    const i = this.#n++;
    const flid = this.flids[Math.floor(this.#rand() * this.flids.length)]!;
    const seqn = `${this.prefix}${++this.#seqn}`;
    const kind = Math.floor(this.#rand() * 4);
    const o = { seqn, dttm: timeAt(i) };
    if (kind === 0) return { flid, text: flop('ETOT', o, flight({ FLID: flid, ETOT: timeAt(i) })), fields: { ETOT: timeAt(i) } };
    if (kind === 1) {
      const gate = [{ CODE: `G${i % 40}`, BEG: timeAt(i), END: timeAt(i + 900) }];
      return { flid, text: flop('GATE', o, flight({ FLID: flid, GATE: gate })), fields: { GATE: gate } };
    }
    if (kind === 2) return { flid, text: flop('UPDT', o, flight({ FLID: flid, XREM: `remark ${i}` })), fields: { XREM: `remark ${i}` } };
    const stand = [{ CODE: `S${i}`, BEG: timeAt(i), END: '' }];
    return { flid, text: flop('STND', o, flight({ FLID: flid, STND: stand })), fields: { STND: stand } };
  }

  /** Records a committed message (versions kept in mailbox-ID order, not in the order inserts returned). */
  #committed(id: number, f: Flop): void {
    this.ids.push(id);
    this.changes.set(id, f);
    const list = this.versions.get(f.flid)!;
    let at = list.length;
    while (at > 0 && list[at - 1]! > id) at--;
    list.splice(at, 0, id);
  }

  /** Writes the plan into the mailbox as another system would (a plain INSERT). */
  async insertPlan(my: TestMysql): Promise<void> {
    const id = await my.mailbox.insertInbound(this.planText());
    this.ids.push(id);
    for (const f of this.flids) {
      this.versions.set(f, [id]);
      this.#planFields.set(f, { AWCD: 'CZ', FLNO: f.slice(-4), STAT: 'SCH' });
    }
  }

  async insertFlops(my: TestMysql, n: number): Promise<void> {
    for (let k = 0; k < n; k++) {
      const f = this.nextFlop();
      this.#committed(await my.mailbox.insertInbound(f.text), f);
    }
  }

  /**
   * Writes `n` FLOPs in ONE multi-row INSERT (a burst the poller finds all at once). The IDs of the
   * rows are read back by their texts, not assumed consecutive: another writer may interleave.
   */
  async insertFlopsBulk(run: FaultRun, n: number): Promise<void> {
    const flops = Array.from({ length: n }, () => this.nextFlop());
    const r = await run.mailboxQuery<{ insertId: number; affectedRows: number }>(
      `INSERT INTO CMINMSGS (MSG_TEXT) VALUES ${flops.map(() => '(?)').join(',')}`,
      flops.map((f) => f.text),
    );
    if (r.affectedRows !== n) throw new Error(`bulk insert wrote ${r.affectedRows} of ${n} rows`);
    const rows = await run.mailboxQuery<{ ID: number; MSG_TEXT: string }[]>(`SELECT ID, MSG_TEXT FROM CMINMSGS WHERE ID >= ? ORDER BY ID`, [
      r.insertId,
    ]);
    const idOf = new Map(rows.map((x) => [x.MSG_TEXT, Number(x.ID)]));
    for (const f of flops) {
      const id = idOf.get(f.text);
      if (id === undefined) throw new Error(`bulk insert: row for ${f.flid} not found at or after ID ${r.insertId}`);
      this.#committed(id, f);
    }
  }

  /** Opens a transaction on a connection of its own and inserts one FLOP/ATOT into it, uncommitted. */
  async hold(run: FaultRun): Promise<HeldInsert> {
    const free = this.flids.filter((f) => !this.#heldFlids.has(f));
    const flid = free[Math.floor(this.#heldRand() * free.length)]!;
    this.#heldFlids.add(flid);
    const i = this.#n++;
    const seqn = `${this.prefix}${++this.#seqn}`;
    const atot = timeAt(i);
    const f: Flop = { flid, text: flop('ATOT', { seqn, dttm: atot }, flight({ FLID: flid, ATOT: atot })), fields: { ATOT: atot } };
    const conn = await mysql.createConnection({ uri: run.my.url, timezone: 'Z' });
    await conn.query('START TRANSACTION');
    const [r] = await conn.query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [f.text]);
    return { id: r.insertId, flop: f, conn, heldAt: Date.now() };
  }

  async commitHeld(h: HeldInsert): Promise<void> {
    await h.conn.query('COMMIT');
    await h.conn.end();
    this.#committed(h.id, h.flop);
  }

  async rollbackHeld(h: HeldInsert): Promise<void> {
    await h.conn.query('ROLLBACK');
    await h.conn.end();
    this.rolledBack.push(h.id);
  }

  /** The final state of each flight: the plan, then every committed message applied in mailbox-ID order. */
  expectedFlight(flid: string): Record<string, unknown> {
    const state: Record<string, unknown> = { ...MODEL_FIELDS, ...this.#planFields.get(flid) };
    for (const id of this.versions.get(flid) ?? []) Object.assign(state, this.changes.get(id)?.fields);
    return state;
  }

  get messageCount(): number {
    return this.ids.length;
  }
  get msgEventCount(): number {
    let n = 0;
    for (const v of this.versions.values()) n += v.length;
    return n;
  }
}

// ---- Progress and invariants --------------------------------------------------------------------

export interface Progress {
  enqueued: number;
  open: number;
  terminal: number;
  eventsOpen: number;
  eventsDead: number;
}

export async function progress(run: FaultRun): Promise<Progress> {
  const r = await run.pg.db.query<Progress>(
    `SELECT (SELECT count(*)::int FROM proc_state) AS enqueued,
            (SELECT count(*)::int FROM proc_state WHERE status IN ('PENDING', 'FAILED')) AS open,
            (SELECT count(*)::int FROM proc_state WHERE status IN ('SUCCEEDED', 'SKIPPED', 'DEAD')) AS terminal,
            (SELECT count(*)::int FROM msgx_outbox_open(now())) AS "eventsOpen",
            (SELECT count(*)::int FROM msgx_outbox_dead()) AS "eventsDead"`,
  );
  return r.rows[0]!;
}

/** Mailbox rows the system has not back-filled yet (read on a fresh connection: MariaDB may have restarted). */
export async function mailboxUnmarked(run: FaultRun): Promise<number> {
  return (await run.mailboxQuery<{ n: number }[]>(`SELECT COUNT(*) AS n FROM CMINMSGS WHERE DATE_PROCESSED IS NULL`))[0]!.n;
}

/**
 * True when every message of the workload is terminal, every event left the outbox and every
 * mailbox row is back-filled — by the roles alone (the sweep retries what a killed pump or a
 * mailbox outage left behind): nothing here or in the checker repairs anything.
 */
export async function drained(run: FaultRun, w: FlightWorkload): Promise<boolean> {
  const p = await progress(run);
  return p.terminal === w.messageCount && p.open === 0 && p.eventsOpen === 0 && (await mailboxUnmarked(run)) === 0;
}

/**
 * A transaction nobody continues: the roles keep running while the checks read, and a living
 * transaction is idle between two of its statements for a moment, so a snapshot alone would catch
 * those. A session counts when it has sat idle in its transaction for longer than this.
 */
export const LINGERING_MS = 5000;

/** Sessions of the run's database idle in a transaction for longer than `olderThanMs`. */
export async function idleInTransaction(run: FaultRun, olderThanMs = LINGERING_MS): Promise<{ pid: number; app: string; query: string }[]> {
  const r = await run.pg.db.query<{ pid: number; app: string; query: string }>(
    `SELECT pid, application_name AS app, left(query, 200) AS query FROM pg_stat_activity
     WHERE datname = current_database() AND pid <> pg_backend_pid()
       AND state LIKE 'idle in transaction%' AND now() - state_change > make_interval(secs => $1::float8 / 1000)`,
    [olderThanMs],
  );
  return r.rows;
}

export interface TopicRecord {
  partition: number;
  offset: number;
  key: string | null;
  value: string | null;
  eventId: string;
  eventType: string;
}

/** Reads a topic from the beginning up to its current end (high watermarks), every partition. */
export async function readWholeTopic(brokers: string[], topic: string, timeoutMs = 60_000): Promise<TopicRecord[]> {
  return (await readTopicToEnd(brokers, topic, { timeoutMs })).map((r) => ({
    partition: r.partition,
    offset: r.offset,
    key: r.key,
    value: r.value,
    eventId: r.headers['msgx-event-id'] ?? '',
    eventType: r.headers['msgx-event-type'] ?? '',
  }));
}

export interface InvariantReport {
  /** The first 40 violations (what an assertion prints). */
  violations: string[];
  /** Every violation found (what the evidence of a failure keeps). */
  all: string[];
  stats: Record<string, number>;
}

/**
 * Where a processing order breaks mailbox-ID order: `got` are the messages in the order msgx
 * applied them, `want` the committed ones in ID order. A message that is not late must come after
 * every smaller ID and before every larger one (docs/ordering.md: the pump never starts a message
 * while a smaller ID is unaccounted for); a late one (its ID was given up as a hole before it
 * committed) may come anywhere after the rows that were accounted before it.
 */
export function fifoBreak(got: number[], want: number[], late: ReadonlySet<number>): string | null {
  const sorted = [...got].sort((a, b) => a - b);
  if (sorted.join() !== want.join()) return `made by ${short(got)}, expected ${short(want)}`;
  let max = Number.NEGATIVE_INFINITY;
  for (const id of got) {
    if (!late.has(id) && id < max) return `${id} (not late) applied after ${max}: ${short(got)}`;
    max = Math.max(max, id);
  }
  return null;
}

/**
 * Every invariant of the issue, checked once the run drained:
 * - every committed message of the workload is terminal and SUCCEEDED, exactly once (one
 *   proc_state row, one flight version, one msg event per message); no rolled-back ID anywhere;
 * - every flight's final state is what applying the committed messages in mailbox-ID order gives
 *   (the workload's own model, FlightWorkload.expectedFlight);
 * - mailbox-ID order: over all messages (msg events in event order) and per FLID (msg events and
 *   the msgx.msg records, duplicates dropped by msgx-event-id) every message that is not in `late`
 *   follows every smaller ID (fifoBreak); per FLID the state versions are 1..n;
 * - per FLID, msgx.schd versions only rise, and the last record is the flight's final state;
 * - no event DEAD or open; every mailbox row back-filled SUCCEEDED and no back-fill left to do
 *   (the sweep role heals a pump killed between its commit and its mailbox write; the checker
 *   only reads, so a sweep that did not recover fails here);
 * - no session left idle in a transaction (for more than LINGERING_MS).
 *
 * `late`: messages allowed out of ID order because they committed after msgx gave their ID up as
 * a hole. Only held inserts the test committed may be in it (a run without held inserts passes
 * none, and then the order must be exactly the ID order).
 */
export async function checkInvariants(run: FaultRun, w: FlightWorkload, o: { late?: ReadonlySet<number> } = {}): Promise<InvariantReport> {
  const all: string[] = [];
  const stats: Record<string, number> = {};
  const db = run.pg.db;
  const late = o.late ?? new Set<number>();
  const push = (msg: string) => {
    all.push(msg);
  };

  // Processing: one terminal SUCCEEDED row per committed message, nothing else.
  const proc = await db.query<{ msg_id: number; status: string; error_class: string | null; note: string | null }>(
    `SELECT msg_id, status, error_class, note FROM proc_state ORDER BY msg_id`,
  );
  stats.messages = proc.rowCount;
  const expectedIds = new Set(w.ids);
  if (proc.rowCount !== w.messageCount) push(`proc_state has ${proc.rowCount} rows, ${w.messageCount} messages were written`);
  for (const r of proc.rows) {
    if (!expectedIds.has(r.msg_id)) push(`proc_state row ${r.msg_id} is not a committed message of the workload`);
    if (r.status !== 'SUCCEEDED' || r.note === 'unchanged')
      push(`message ${r.msg_id} is ${r.status}${r.error_class ? `(${r.error_class})` : ''}${r.note ? ` ${r.note}` : ''}`);
  }
  for (const id of late) if (!expectedIds.has(id)) push(`late message ${id} is not a committed message of the workload`);
  const attempts = await db.query<{ n: number }>(`SELECT coalesce(max(attempts), 0)::int AS n FROM proc_state`);
  stats.maxAttempts = attempts.rows[0]!.n;

  // Flights: final version = number of committed messages that touched it; final state = the model's.
  const flights = await readFlightsOfDay(db, DAY);
  const byFlid = new Map(flights.map((f) => [f.flid, f]));
  for (const [flid, ids] of w.versions) {
    const f = byFlid.get(flid);
    if (!f) {
      push(`flight ${flid} missing`);
      continue;
    }
    if (f.stateVersion !== ids.length) push(`flight ${flid} at v${f.stateVersion}, ${ids.length} messages changed it`);
    else if (!ids.some((id) => late.has(id)) && f.lastMsgId !== null && f.lastMsgId !== ids[ids.length - 1])
      push(`flight ${flid} last changed by ${f.lastMsgId}, expected ${ids.at(-1)}`);
    const got = flightJson(f);
    const want = w.expectedFlight(flid);
    for (const [field, value] of Object.entries(want))
      if (JSON.stringify(got[field]) !== JSON.stringify(value))
        push(
          `flight ${flid} ${field} is ${JSON.stringify(got[field])}, applying the committed messages in ID order gives ${JSON.stringify(value)}`,
        );
  }

  // Outbox rows in PostgreSQL.
  const ev = await db.query<{ target: string; status: string; n: number }>(
    `SELECT target, msgx_event_state(status, target, event_id, writer_xid, now()) AS status, count(*)::int AS n FROM msg_event GROUP BY 1, 2 ORDER BY 1, 2`,
  );
  for (const r of ev.rows) {
    stats[`events.${r.target}.${r.status}`] = r.n;
    if (r.status !== 'SENT') push(`${r.n} ${r.target} events ${r.status}`);
  }
  const msgRows = await db.query<{ flid: string; versions: number[]; sources: string[] }>(
    `SELECT flid, array_agg(state_version ORDER BY event_id) AS versions, array_agg(source_id ORDER BY event_id) AS sources
     FROM msg_event WHERE target = 'msg' GROUP BY flid`,
  );
  for (const r of msgRows.rows) {
    const ids = w.versions.get(r.flid);
    if (!ids) {
      push(`msg events for unknown flight ${r.flid}`);
      continue;
    }
    const want = ids.map((_, i) => i + 1);
    if (r.versions.join() !== want.join()) push(`msg_event ${r.flid}: versions ${short(r.versions)}, expected 1..${ids.length}`);
    const broken = fifoBreak(r.sources.map(Number), ids, late);
    if (broken) push(`msg_event ${r.flid}: ${broken}`);
  }
  if (msgRows.rowCount !== w.versions.size) push(`msg events for ${msgRows.rowCount} flights, ${w.versions.size} expected`);

  // msgx.msg on Kafka: duplicates dropped by event id, per FLID 1..n in partition order.
  const msg = await readWholeTopic(run.brokers, run.topicMsg);
  stats.msgRecords = msg.length;
  // The global order, from what reached Kafka: the pump applies one message after another (one
  // pump at a time, under its lock) and numbers each change event as it applies it, so the
  // records in msgx-event-id order name their messages (source.msgId) in the order they were
  // applied; that must be mailbox-ID order.
  const byEventId = new Map<number, number>();
  for (const r of msg) {
    const val = JSON.parse(r.value ?? 'null') as { source?: { msgId?: number } } | null;
    if (val?.source?.msgId !== undefined) byEventId.set(Number(r.eventId), val.source.msgId);
  }
  const order: number[] = [];
  for (const [, msgId] of [...byEventId].sort((a, b) => a[0] - b[0])) if (msgId !== order.at(-1)) order.push(msgId);
  const global = fifoBreak(
    order,
    [...w.ids].sort((a, b) => a - b),
    late,
  );
  if (global) push(`msgx.msg (in msgx-event-id order) applies messages out of mailbox-ID order: ${global}`);
  const seen = new Set<string>();
  const perFlid = new Map<string, { version: number; msgId: number }[]>();
  const partitionOf = new Map<string, number>();
  for (const r of msg) {
    if (!r.eventId) push(`msgx.msg record at ${r.partition}/${r.offset} without msgx-event-id`);
    if (seen.has(r.eventId)) continue;
    seen.add(r.eventId);
    const val = JSON.parse(r.value ?? 'null') as { flid: string; stateVersion: number; source: { msgId: number } };
    if (r.key !== val.flid) push(`msgx.msg record key ${r.key} ≠ flid ${val.flid}`);
    const p = partitionOf.get(val.flid);
    if (p !== undefined && p !== r.partition) push(`flight ${val.flid} on partitions ${p} and ${r.partition}`);
    partitionOf.set(val.flid, r.partition);
    let list = perFlid.get(val.flid);
    if (!list) perFlid.set(val.flid, (list = []));
    list.push({ version: val.stateVersion, msgId: val.source.msgId });
  }
  stats.msgUnique = seen.size;
  stats.msgDuplicates = msg.length - seen.size;
  if (seen.size !== w.msgEventCount) push(`msgx.msg holds ${seen.size} distinct events, ${w.msgEventCount} expected`);
  for (const [flid, ids] of w.versions) {
    const got = perFlid.get(flid) ?? [];
    const versions = got.map((g) => g.version);
    if (versions.join() !== ids.map((_, i) => i + 1).join())
      push(`msgx.msg ${flid}: versions ${short(versions)} (deduplicated), expected 1..${ids.length}`);
    else {
      const broken = fifoBreak(
        got.map((g) => g.msgId),
        ids,
        late,
      );
      if (broken) push(`msgx.msg ${flid}: ${broken}`);
    }
  }

  // msgx.schd on Kafka: versions only rise per FLID (repeats of an event dropped); the last record
  // of every key in its partition — repeats kept, it is what compaction leaves a reader — is the
  // model's final state, not the stored flight's.
  const schdRecs = await readWholeTopic(run.brokers, run.topicSchd);
  stats.schdRecords = schdRecs.length;
  const seenSchd = new Set<string>();
  const rising = new Map<string, number>();
  const lastSchd = new Map<string, { version: number; value: Record<string, unknown> }>();
  for (const r of schdRecs) {
    if (r.value !== null) {
      const val = JSON.parse(r.value) as Record<string, unknown> & { stateVersion: number };
      lastSchd.set(r.key!, { version: val.stateVersion, value: val });
    } else lastSchd.delete(r.key!);
    if (seenSchd.has(r.eventId)) continue;
    seenSchd.add(r.eventId);
    if (r.value === null) {
      push(`unexpected tombstone for ${r.key}`);
      continue;
    }
    const val = JSON.parse(r.value) as { stateVersion: number };
    const prev = rising.get(r.key!);
    if (prev !== undefined && prev >= val.stateVersion) push(`msgx.schd ${r.key}: v${val.stateVersion} after v${prev}`);
    rising.set(r.key!, val.stateVersion);
  }
  stats.schdUnique = seenSchd.size;
  for (const [flid, ids] of w.versions) {
    const last = lastSchd.get(flid);
    if (!last) {
      push(`msgx.schd has nothing for ${flid}`);
      continue;
    }
    if (last.version !== ids.length) push(`msgx.schd ${flid}: last record v${last.version}, ${ids.length} messages changed it`);
    for (const [field, value] of Object.entries(w.expectedFlight(flid)))
      if (JSON.stringify(last.value[field] ?? MODEL_FIELDS[field]) !== JSON.stringify(value))
        push(`msgx.schd ${flid}: last record's ${field} is ${JSON.stringify(last.value[field])}, the model's ${JSON.stringify(value)}`);
  }
  if (lastSchd.size !== w.versions.size) push(`msgx.schd holds ${lastSchd.size} flights, ${w.versions.size} expected`);

  // The mailbox: every row back-filled by the system (the checker writes nothing).
  const todos = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM backfill_todo`)).rows[0]!.n;
  if (todos > 0) push(`${todos} back-fills still to do in backfill_todo`);
  const mb = await run.mailboxQuery<{ s: string | null; n: number; unmarked: number }[]>(
    `SELECT PROC_STATUS AS s, COUNT(*) AS n, SUM(DATE_PROCESSED IS NULL) AS unmarked FROM CMINMSGS GROUP BY PROC_STATUS`,
  );
  for (const r of mb) {
    if (r.s !== 'SUCCEEDED') push(`${r.n} mailbox rows with PROC_STATUS ${r.s}`);
    if (Number(r.unmarked) > 0) push(`${r.unmarked} mailbox rows without DATE_PROCESSED`);
  }
  stats.mailboxRows = mb.reduce((n, r) => n + Number(r.n), 0);
  if (stats.mailboxRows !== w.messageCount) push(`the mailbox holds ${stats.mailboxRows} rows, ${w.messageCount} were written`);

  const idle = await idleInTransaction(run);
  if (idle.length) push(`idle in transaction for more than ${LINGERING_MS} ms: ${JSON.stringify(idle)}`);
  const report = { violations: all.slice(0, 40), all, stats };
  run.reports.push(report);
  return report;
}

const short = (xs: unknown[]) => (xs.length > 12 ? `${xs.slice(0, 12).join(',')},…(${xs.length})` : xs.join(','));

// ---- msgx's own account, through its public admin API ---------------------------------------------

/** GET /admin/stats and GET /admin/trace/{id} of the run, over HTTP (the twin's server, in this process). */
export interface AdminApi {
  ordering(): Promise<OrderingStats>;
  trace(msgId: number): Promise<MessageTrace>;
  close(): Promise<void>;
}

export async function adminApi(run: FaultRun): Promise<AdminApi> {
  const ctx = makeContext({ db: run.pg.db, mailbox: run.my.mailbox, clock: systemClock, env: { ...run.env, MSGX_LOG_LEVEL: 'SILENT' } });
  const server = await startHttpServer(ctx, buildRouter(), { port: 0 });
  const { port } = server.address() as { port: number };
  const get = async <T>(path: string): Promise<T> => {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    if (!r.ok) throw new Error(`GET ${path}: ${r.status} ${await r.text()}`);
    return (await r.json()) as T;
  };
  return {
    ordering: async () => (await get<{ ordering: OrderingStats }>('/admin/stats')).ordering,
    trace: (msgId) => get<MessageTrace>(`/admin/trace/${msgId}`),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

// ---- The run's private services (globalSetup.ts) -------------------------------------------------

const privateServices = () => inject('faultServices');

/** SIGKILL of the run's private Kafka broker (no clean shutdown, no controlled leadership move). */
export async function kafkaKill(): Promise<void> {
  note('Kafka broker SIGKILL');
  await kafkaStop(privateServices().kafka, true);
  note('Kafka broker gone');
}
/** Starts the private broker again on its old data and waits until it answers. */
export async function kafkaRestart(): Promise<void> {
  note('Kafka broker restarting');
  await kafkaStart(privateServices().kafka);
  note('Kafka broker answers');
}
/** SIGKILL of the run's private mariadbd: a crash, InnoDB recovers on the next start. */
export async function mariadbKill(): Promise<void> {
  note('mariadbd SIGKILL');
  await mariadbStop(privateServices().mariadb, true);
  note('mariadbd gone');
}
export async function mariadbRestart(): Promise<void> {
  note('mariadbd restarting');
  await mariadbStart(privateServices().mariadb);
  note('mariadbd answers');
}

/**
 * The local TCP ports of a process's open sockets (Linux: its socket fds matched against
 * /proc/net/tcp{,6}): with pg_stat_activity.client_port they pick out that process's sessions.
 */
export function localPortsOf(pid: number): number[] {
  const inodes = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`, { encoding: 'utf8' }));
      if (m) inodes.add(m[1]!);
    }
  } catch {
    return []; // the process is gone
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length > 9 && inodes.has(cols[9]!)) ports.push(Number.parseInt(cols[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long a wait may go without any progress before it counts as stalled. */
export const STALL_MS = 60_000;

/**
 * Waits until `done()` holds for as long as the run keeps making progress: a slow host that is
 * still working off a backlog is not a failure; only STALL_MS without any change in `progress`
 * (terminal messages, events left the outbox, mailbox rows back-filled) is.
 */
export async function untilDoneWhileProgressing(run: FaultRun, done: () => Promise<boolean>, what: string): Promise<void> {
  let last = '';
  let changedAt = Date.now();
  for (;;) {
    if (await done()) return;
    const p = await progress(run);
    const now = JSON.stringify([p.terminal, p.open, p.eventsOpen, await mailboxUnmarked(run)]);
    if (now !== last) {
      last = now;
      changedAt = Date.now();
    } else if (Date.now() - changedAt > STALL_MS) {
      throw new Error(`${what}: stalled, no progress for ${STALL_MS} ms at ${now} (terminal, open, events open, mailbox unmarked)`);
    }
    await sleep(250);
  }
}
