#!/usr/bin/env node
// Local test services for msgx: PostgreSQL, MariaDB (the mailbox) and a single-node Kafka broker.
//
//   node scripts/services.mjs up [--quiet-stdout]   make sure all three answer; print their URLs
//   node scripts/services.mjs down                  stop what `up` started
//   node scripts/services.mjs status                one line per service on stdout
//   node scripts/services.mjs kafka-stop [--kill]   stop the broker (data kept); --kill = SIGKILL
//   node scripts/services.mjs kafka-start           start the broker again (same data)
//
// Plain Node ESM with no build step. `up` prints exactly three lines on stdout
// (MSGX_PG_URL=…, MSGX_MAILBOX_URL=…, MSGX_KAFKA_BROKERS=…), and nothing with --quiet-stdout;
// progress and errors go to stderr. The same lines are written to .services/env.
// State lives under .services/ at the project root (git-ignored). See docs/services.md.

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const STATE = path.join(ROOT, '.services');
const KAFKA_SRC = path.join(ROOT, 'scripts', 'kafka');
const KAFKA_DIR = path.join(STATE, 'kafka');
const KAFKA_LIBS = path.join(KAFKA_DIR, 'libs');
const KAFKA_VERSIONS = ['3.9.1', '3.9.0'];

const HOST = '127.0.0.1';
const PG_PORT = 5432;
const MY_PORT = 3306;
const KAFKA_PORT = 9092;
const KAFKA_CONTROLLER_PORT = 9093;
const DB = 'test';
const PG_USERS = ['postgres', 'root'];
const MAILBOX_URL = `mysql://root@${HOST}:${MY_PORT}/${DB}`;

const DB_WAIT_MS = 60_000;
const KAFKA_WAIT_MS = 90_000;

// ---------------------------------------------------------------------------------------------
// small helpers

const log = (msg) => process.stderr.write(`services: ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Fail extends Error {}

function mkdirp(dir) {
  fs.mkdirSync(dir, { recursive: true });
}

function readText(file) {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function tail(file, lines = 30) {
  const text = readText(file);
  if (!text) return '';
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

/** Resolves true when a TCP connection to host:port is accepted within timeoutMs. */
function tcpOpen(port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: HOST, port });
    const done = (ok) => {
      sock.removeAllListeners();
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

function pidAlive(pid) {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return e.code === 'EPERM';
  }
  // A zombie (exited, not yet reaped) still answers kill 0.
  const stat = readText(`/proc/${pid}/stat`);
  if (stat && / Z /.test(stat.slice(stat.lastIndexOf(')')))) return false;
  return true;
}

function cmdline(pid) {
  return (readText(`/proc/${pid}/cmdline`) ?? '').split('\0').join(' ');
}

/** Runs a command to completion (without blocking the event loop), its output appended to logFile. */
async function run(cmd, args, logFile, opts = {}) {
  mkdirp(path.dirname(logFile));
  const fd = fs.openSync(logFile, 'a');
  fs.writeSync(fd, `\n$ ${cmd} ${args.join(' ')}   # ${new Date().toISOString()}\n`);
  try {
    return await new Promise((resolve) => {
      const child = spawn(cmd, args, { stdio: ['ignore', fd, fd], cwd: ROOT, ...opts });
      child.once('error', (e) => {
        fs.appendFileSync(logFile, `${e.message}\n`);
        resolve(-1);
      });
      child.once('exit', (code) => resolve(code ?? -1));
    });
  } finally {
    fs.closeSync(fd);
  }
}

/** Polls probe() (resolving truthy when ready) until it succeeds or ms elapse. */
async function waitFor(what, ms, probe, { interval = 250, abort } = {}) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    const why = abort?.();
    if (why) throw new Fail(`${what}: ${why}`);
    if (Date.now() > deadline) {
      throw new Fail(`${what} did not answer within ${ms / 1000}s${last ? ` (${last.message})` : ''}`);
    }
    await sleep(interval);
  }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

const pgUrl = (user, db = DB) => `postgres://${user}@${HOST}:${PG_PORT}/${db}`;

/** Returns the URL that works (SELECT 1 on db `test`), creating the database if missing; null if PG is down. */
async function pgProbe() {
  if (!(await tcpOpen(PG_PORT))) return null;
  const { default: pg } = await import('pg');
  let lastErr;
  for (const user of PG_USERS) {
    const client = new pg.Client({ connectionString: pgUrl(user), connectionTimeoutMillis: 2000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('SELECT 1');
      return pgUrl(user);
    } catch (e) {
      lastErr = e;
      if (e.code === '3D000') {
        // database "test" does not exist: create it as this user.
        const admin = new pg.Client({ connectionString: pgUrl(user, 'postgres'), connectionTimeoutMillis: 2000 });
        admin.on('error', () => {});
        try {
          await admin.connect();
          await admin.query(`CREATE DATABASE ${DB}`);
          return pgUrl(user);
        } catch (e2) {
          lastErr = e2;
        } finally {
          await admin.end().catch(() => {});
        }
      }
      // 57P03 = the database system is starting up: not an auth problem, report "not yet".
      if (e.code === '57P03' || /ECONNREFUSED|ECONNRESET|terminat/i.test(e.message)) return null;
    } finally {
      await client.end().catch(() => {});
    }
  }
  throw new Fail(`PostgreSQL answers on ${HOST}:${PG_PORT} but no user of ${PG_USERS.join('/')} can use db ${DB}: ${lastErr?.message}`);
}

function pgVersion() {
  try {
    return fs.readdirSync('/etc/postgresql').sort().at(-1);
  } catch {
    return null;
  }
}

async function ensurePg() {
  const url = await pgProbe();
  if (url) return url;
  const ver = pgVersion();
  if (!ver) throw new Fail(`PostgreSQL does not answer on ${HOST}:${PG_PORT} and no cluster is configured in /etc/postgresql`);
  log(`starting PostgreSQL ${ver} …`);
  const logFile = path.join(STATE, 'postgresql-start.log');
  const rc = await run('pg_ctlcluster', ['--skip-systemctl-redirect', ver, 'main', 'start'], logFile);
  // rc 2 = already running (maybe still starting): just wait for it below.
  if (rc !== 0 && rc !== 2) log(`pg_ctlcluster exited ${rc}; waiting anyway (see ${logFile})`);
  else if (rc === 0) fs.writeFileSync(path.join(STATE, 'postgresql.started'), `${ver}\n`);
  try {
    return await waitFor('PostgreSQL', DB_WAIT_MS, pgProbe);
  } catch (e) {
    throw new Fail(`${e.message}\n${tail(logFile, 15)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// MariaDB (the mailbox)

async function myProbe() {
  if (!(await tcpOpen(MY_PORT))) return null;
  const { default: mysql } = await import('mysql2/promise');
  let conn;
  try {
    conn = await mysql.createConnection({ host: HOST, port: MY_PORT, user: 'root', password: '', connectTimeout: 2000 });
    await conn.query(`CREATE DATABASE IF NOT EXISTS \`${DB}\``);
    await conn.query(`SELECT 1 FROM DUAL`);
    return MAILBOX_URL;
  } catch (e) {
    // Still starting (handshake refused/reset): not ready yet. Access denied is final.
    if (e.code === 'ER_ACCESS_DENIED_ERROR') {
      throw new Fail(`MariaDB answers on ${HOST}:${MY_PORT} but root with an empty password is refused: ${e.message}`);
    }
    return null;
  } finally {
    await conn?.end().catch(() => {});
  }
}

async function ensureMy() {
  const url = await myProbe();
  if (url) return url;
  const bin = '/usr/sbin/mariadbd';
  if (!fs.existsSync(bin)) throw new Fail(`MariaDB does not answer on ${HOST}:${MY_PORT} and ${bin} is not installed`);
  log('starting MariaDB …');
  // The socket/pid directory is on tmpfs and may be gone after a reboot.
  if (!fs.existsSync('/run/mysqld')) {
    mkdirp('/run/mysqld');
    spawnSync('chown', ['mysql:mysql', '/run/mysqld'], { stdio: 'ignore' });
  }
  const logFile = path.join(STATE, 'mariadb-start.log');
  const rc = await run('start-stop-daemon', ['--start', '--oknodo', '--background', '--exec', bin], logFile);
  if (rc !== 0) throw new Fail(`start-stop-daemon exited ${rc}\n${tail(logFile, 15)}`);
  if (!/already running/.test(tail(logFile, 1))) fs.writeFileSync(path.join(STATE, 'mariadb.started'), 'mariadbd\n');
  try {
    return await waitFor('MariaDB', DB_WAIT_MS, myProbe);
  } catch (e) {
    throw new Fail(`${e.message}\n${tail('/var/log/mysql/error.log', 15)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Kafka
//
// A broker instance is {dir, port, controllerPort}: its config, data, pid and logs live in `dir`.
// The shared test broker is DEFAULT_KAFKA (.services/kafka, 9092/9093); the fault runs start
// private ones on other ports (startKafka/stopKafka are exported for them) so that killing a
// broker never touches anyone else's. Every instance runs the same jars (.services/kafka/libs).

const DEFAULT_KAFKA = { dir: KAFKA_DIR, port: KAFKA_PORT, controllerPort: KAFKA_CONTROLLER_PORT };
const brokersOf = (inst) => `${HOST}:${inst.port}`;
const kafkaFiles = (inst) => ({
  data: path.join(inst.dir, 'data'),
  props: path.join(inst.dir, 'server.properties'),
  pid: path.join(inst.dir, 'pid'),
  out: path.join(inst.dir, 'kafka.out'),
});

async function kafkaProbe(inst = DEFAULT_KAFKA, timeoutMs = 1500) {
  if (!(await tcpOpen(inst.port))) return null;
  const { Kafka, logLevel } = await import('kafkajs');
  const kafka = new Kafka({
    clientId: 'msgx-services',
    brokers: [brokersOf(inst)],
    logLevel: logLevel.NOTHING,
    connectionTimeout: timeoutMs,
    requestTimeout: timeoutMs,
    retry: { retries: 0 },
  });
  const admin = kafka.admin();
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    if (!cluster?.brokers?.length || cluster.controller == null || cluster.controller < 0) return null;
    return brokersOf(inst);
  } catch {
    return null;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/**
 * After a fresh start: make the broker create its internal topics (__consumer_offsets,
 * __transaction_state) now, so the first test's consumer group or transactional producer does
 * not meet "coordinator not available/loading" errors. Best effort.
 */
async function warmKafka(inst) {
  const { Kafka, logLevel } = await import('kafkajs');
  const kafka = new Kafka({
    clientId: 'msgx-services',
    brokers: [brokersOf(inst)],
    logLevel: logLevel.NOTHING,
    retry: { retries: 20, initialRetryTime: 200, maxRetryTime: 1000 },
  });
  const admin = kafka.admin();
  const producer = kafka.producer({ transactionalId: 'msgx-services-warmup', idempotent: true, maxInFlightRequests: 1 });
  try {
    await admin.connect();
    await admin.describeGroups(['msgx-services-warmup']);
    await producer.connect();
  } catch (e) {
    log(`warning: Kafka warm-up incomplete (${e.message})`);
  } finally {
    await producer.disconnect().catch(() => {});
    await admin.disconnect().catch(() => {});
  }
}

/** The running broker's pid for this instance, or null. */
export function kafkaPid(inst = DEFAULT_KAFKA) {
  const { pid: pidFile, props } = kafkaFiles(inst);
  const pid = Number.parseInt(readText(pidFile) ?? '', 10);
  if (!pid || !pidAlive(pid)) return null;
  // Guard against a recycled pid: it must be this instance's broker.
  const cmd = cmdline(pid);
  if (!cmd.includes('kafka.Kafka') || !cmd.includes(props)) return null;
  return pid;
}

function javaBin() {
  const home = process.env.JAVA_HOME;
  if (home && fs.existsSync(path.join(home, 'bin', 'java'))) return path.join(home, 'bin', 'java');
  return 'java';
}

/** Resolves the broker's jars into .services/kafka/libs with Maven (once; ~/.m2 caches them). */
async function ensureKafkaLibs() {
  const marker = path.join(KAFKA_LIBS, '.version');
  const have = readText(marker)?.trim();
  if (have && KAFKA_VERSIONS.includes(have)) return have;
  const logFile = path.join(KAFKA_DIR, 'mvn.log');
  for (const version of KAFKA_VERSIONS) {
    log(`fetching Apache Kafka ${version} with Maven …`);
    fs.rmSync(KAFKA_LIBS, { recursive: true, force: true });
    mkdirp(KAFKA_LIBS);
    const rc = await run(
      'mvn',
      [
        '-q',
        '-B',
        '-Dstyle.color=never',
        '-f',
        path.join(KAFKA_SRC, 'pom.xml'),
        `-Dkafka.version=${version}`,
        `-DoutputDirectory=${KAFKA_LIBS}`,
        'dependency:copy-dependencies',
      ],
      logFile,
    );
    const jar = path.join(KAFKA_LIBS, `kafka_2.13-${version}.jar`);
    if (rc === 0 && fs.existsSync(jar)) {
      fs.writeFileSync(marker, `${version}\n`);
      return version;
    }
    log(`Maven could not fetch Kafka ${version} (exit ${rc})`);
  }
  throw new Fail(`could not fetch Apache Kafka (${KAFKA_VERSIONS.join(', ')}) with Maven; see ${logFile}\n${tail(logFile, 20)}`);
}

function writeKafkaConfig(inst) {
  const { data, props: file } = kafkaFiles(inst);
  const tpl = fs.readFileSync(path.join(KAFKA_SRC, 'server.properties.template'), 'utf8');
  const props = tpl
    .replaceAll('@PORT@', String(inst.port))
    .replaceAll('@CONTROLLER_PORT@', String(inst.controllerPort))
    .replaceAll('@LOG_DIR@', data);
  if (readText(file) !== props) fs.writeFileSync(file, props);
}

function kafkaJvmArgs(inst) {
  return [
    '-Xms256m',
    '-Xmx512m',
    '-XX:+UseG1GC',
    '-XX:MaxGCPauseMillis=20',
    '-Djava.awt.headless=true',
    `-Dkafka.logs.dir=${inst.dir}`,
    `-Dlog4j.configuration=file:${path.join(KAFKA_SRC, 'log4j.properties')}`,
    '-cp',
    `${KAFKA_LIBS}/*`,
  ];
}

/** Formats the KRaft log directory once (a meta.properties file marks it formatted). */
async function formatKafkaStorage(inst) {
  const { data, props } = kafkaFiles(inst);
  if (fs.existsSync(path.join(data, 'meta.properties'))) return;
  mkdirp(data);
  let clusterId;
  do clusterId = randomBytes(16).toString('base64url');
  while (clusterId.startsWith('-'));
  const logFile = path.join(inst.dir, 'format.log');
  const rc = await run(
    javaBin(),
    [...kafkaJvmArgs(inst), 'kafka.tools.StorageTool', 'format', '-t', clusterId, '-c', props, '--ignore-formatted'],
    logFile,
  );
  if (rc !== 0) throw new Fail(`formatting the Kafka log dir failed (exit ${rc})\n${tail(logFile, 20)}`);
}

function startKafkaProcess(inst) {
  const { props, pid: pidFile, out } = kafkaFiles(inst);
  const outFd = fs.openSync(out, 'a');
  fs.writeSync(outFd, `\n--- start ${new Date().toISOString()}\n`);
  let child;
  try {
    child = spawn(javaBin(), [...kafkaJvmArgs(inst), 'kafka.Kafka', props], {
      cwd: inst.dir,
      detached: true,
      stdio: ['ignore', outFd, outFd],
    });
  } finally {
    fs.closeSync(outFd);
  }
  let exited = null;
  child.once('exit', (code, signal) => {
    exited = signal ?? `exit ${code}`;
  });
  child.once('error', (e) => {
    exited = e.message;
  });
  child.unref();
  if (!child.pid) throw new Fail(`could not start java: ${exited ?? 'no pid'}`);
  fs.writeFileSync(pidFile, `${child.pid}\n`);
  return { pid: child.pid, exited: () => exited };
}

/** Start lock, so two concurrent `up`s do not start two brokers. */
async function withKafkaLock(inst, fn) {
  const lock = path.join(inst.dir, 'start.lock');
  const deadline = Date.now() + KAFKA_WAIT_MS + 60_000;
  for (;;) {
    try {
      fs.mkdirSync(lock);
      fs.writeFileSync(path.join(lock, 'owner'), `${process.pid}\n`);
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      const owner = Number.parseInt(readText(path.join(lock, 'owner')) ?? '', 10);
      const age = Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? 0);
      if ((owner && !pidAlive(owner)) || (!owner && age > 5000)) {
        fs.rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Fail(`another services.mjs (pid ${owner}) holds ${lock}`);
      await sleep(300);
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * Makes sure the instance's broker answers (starting it, with its data kept, when it does not) and
 * returns its bootstrap address. `inst` defaults to the shared test broker.
 */
export async function startKafka(inst = DEFAULT_KAFKA) {
  if (await kafkaProbe(inst)) return brokersOf(inst);
  mkdirp(inst.dir);
  return withKafkaLock(inst, async () => {
    // Someone may have started it while we waited for the lock.
    if (await kafkaProbe(inst)) return brokersOf(inst);
    let pid = kafkaPid(inst);
    let exited = () => (pidAlive(pid) ? null : 'the broker process exited');
    if (pid) {
      log(`Kafka broker (pid ${pid}) is running but not answering yet; waiting …`);
    } else {
      if (await tcpOpen(inst.port)) {
        throw new Fail(`port ${inst.port} is taken by something that does not answer as a Kafka broker`);
      }
      if (await tcpOpen(inst.controllerPort)) {
        throw new Fail(`port ${inst.controllerPort} (Kafka controller) is taken by another process`);
      }
      mkdirp(KAFKA_DIR);
      const version = await ensureKafkaLibs();
      writeKafkaConfig(inst);
      await formatKafkaStorage(inst);
      log(`starting Kafka ${version} broker on ${brokersOf(inst)} (log: ${path.relative(ROOT, inst.dir)}/server.log) …`);
      const started = startKafkaProcess(inst);
      pid = started.pid;
      exited = () => {
        const x = started.exited();
        return x ? `the broker process ended (${x})` : null;
      };
    }
    try {
      await waitFor('Kafka broker', KAFKA_WAIT_MS, () => kafkaProbe(inst), { interval: 500, abort: exited });
      await warmKafka(inst);
    } catch (e) {
      const logs = tail(kafkaFiles(inst).out, 10) + '\n' + tail(path.join(inst.dir, 'server.log'), 20);
      throw new Fail(`${e.message}\n${logs.trim()}`);
    }
    return brokersOf(inst);
  });
}

/** Stops the instance's broker (data kept): SIGTERM, or SIGKILL with `kill`. False if it was not running. */
export async function stopKafka(inst = DEFAULT_KAFKA, { kill = false } = {}) {
  const pidFile = kafkaFiles(inst).pid;
  const pid = kafkaPid(inst);
  if (!pid) {
    fs.rmSync(pidFile, { force: true });
    return false;
  }
  process.kill(pid, kill ? 'SIGKILL' : 'SIGTERM');
  const deadline = Date.now() + 60_000;
  while (pidAlive(pid)) {
    if (Date.now() > deadline) {
      log(`Kafka broker (pid ${pid}) did not stop within 60s; killing it`);
      process.kill(pid, 'SIGKILL');
      await sleep(500);
      break;
    }
    await sleep(100);
  }
  // The listener is gone once the process is; make sure before returning (fault tests rely on it).
  await waitFor('Kafka port release', 10_000, async () => !(await tcpOpen(inst.port, 200)));
  fs.rmSync(pidFile, { force: true });
  return true;
}

// ---------------------------------------------------------------------------------------------
// commands

async function up(args) {
  const quiet = args.includes('--quiet-stdout');
  mkdirp(STATE);
  // Databases in parallel; Kafka (which may download and take a while) alongside.
  const [pg, my, kafka] = await Promise.all([ensurePg(), ensureMy(), startKafka()]);
  const lines = [`MSGX_PG_URL=${pg}`, `MSGX_MAILBOX_URL=${my}`, `MSGX_KAFKA_BROKERS=${kafka}`];
  const text = lines.join('\n') + '\n';
  if (readText(path.join(STATE, 'env')) !== text) fs.writeFileSync(path.join(STATE, 'env'), text);
  if (!quiet) process.stdout.write(text);
}

async function down() {
  await stopKafka();
  const pgMark = path.join(STATE, 'postgresql.started');
  const ver = readText(pgMark)?.trim();
  if (ver) {
    await run('pg_ctlcluster', ['--skip-systemctl-redirect', ver, 'main', 'stop'], path.join(STATE, 'postgresql-start.log'));
    fs.rmSync(pgMark, { force: true });
  }
  const myMark = path.join(STATE, 'mariadb.started');
  if (fs.existsSync(myMark)) {
    await run(
      'start-stop-daemon',
      ['--stop', '--oknodo', '--retry', 'TERM/30/KILL/5', '--exec', '/usr/sbin/mariadbd'],
      path.join(STATE, 'mariadb-start.log'),
    );
    fs.rmSync(myMark, { force: true });
  }
}

async function status() {
  const [pg, my, kafka] = await Promise.all([
    pgProbe().catch((e) => `error: ${e.message}`),
    myProbe().catch((e) => `error: ${e.message}`),
    kafkaProbe(DEFAULT_KAFKA),
  ]);
  const pid = kafkaPid();
  const version = readText(path.join(KAFKA_LIBS, '.version'))?.trim();
  const lines = [
    `postgresql ${pg ? `up     ${pg}` : 'down'}${fs.existsSync(path.join(STATE, 'postgresql.started')) ? ' (started by services.mjs)' : ''}`,
    `mariadb    ${my ? `up     ${my}` : 'down'}${fs.existsSync(path.join(STATE, 'mariadb.started')) ? ' (started by services.mjs)' : ''}`,
    `kafka      ${kafka ? `up     ${kafka}` : 'down'}${pid ? ` (pid ${pid}, Kafka ${version ?? '?'})` : ''}`,
  ];
  process.stdout.write(lines.join('\n') + '\n');
  return pg && my && kafka && !String(pg).startsWith('error') && !String(my).startsWith('error');
}

const USAGE = `usage: node scripts/services.mjs <up [--quiet-stdout] | down | status | kafka-start | kafka-stop [--kill]>`;

async function main() {
  const [cmd, ...args] = process.argv.slice(2);
  switch (cmd) {
    case 'up':
      await up(args);
      break;
    case 'down':
      await down();
      break;
    case 'status':
      if (!(await status())) process.exitCode = 1;
      break;
    case 'kafka-start':
      mkdirp(STATE);
      await startKafka();
      break;
    case 'kafka-stop':
      await stopKafka(DEFAULT_KAFKA, { kill: args.includes('--kill') });
      break;
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(`${USAGE}\n`);
      break;
    default:
      process.stderr.write(`${USAGE}\n`);
      process.exitCode = 2;
  }
}

// Run as a command only; the fault runs import startKafka/stopKafka for their private brokers.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    // Exit explicitly: a lingering client socket must never keep `up` (and so `npm test`) waiting.
    () => process.exit(process.exitCode ?? 0),
    (e) => {
      process.stderr.write(`services: ${e instanceof Fail ? e.message : (e?.stack ?? e)}\n`);
      process.exit(1);
    },
  );
}
