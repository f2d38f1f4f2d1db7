/**
 * The fault runs' own MariaDB and Kafka broker. The scenarios SIGKILL them, so they must never be
 * the shared test services other work depends on: each fault run (vitest.faults.config.ts,
 * `globalSetup.ts`) starts a private mariadbd and a private KRaft broker on free ports, with data
 * directories under the OS temp dir, and removes them afterwards. PostgreSQL stays shared: the
 * scenarios only terminate the backends of their own database.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readlinkSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import { kafkaPid, startKafka, stopKafka } from '../../scripts/services.mjs';

const run = promisify(execFile);
const MARIADBD = '/usr/sbin/mariadbd';

export interface KafkaInstance {
  dir: string;
  port: number;
  controllerPort: number;
}
export interface MariadbInstance {
  dir: string;
  port: number;
  /** More server options, e.g. --ssl-ca/--ssl-cert/--ssl-key (test/integration/mailbox-tls.test.ts). */
  args?: string[];
}

// ---- Kafka: scripts/services.mjs does the work (jars from Maven, KRaft format, start, probe) ----

export async function kafkaStart(k: KafkaInstance): Promise<string> {
  return startKafka(k);
}

/** Stops the private broker: SIGTERM, or SIGKILL (`kill`), and waits until its port is closed. */
export async function kafkaStop(k: KafkaInstance, kill: boolean): Promise<void> {
  const pid = kafkaPid(k);
  if (!pid) throw new Error(`the private Kafka broker in ${k.dir} is not running`);
  await stopKafka(k, { kill });
}

// ---- MariaDB ---------------------------------------------------------------------------------------

const mariadbUrl = (m: MariadbInstance, db = '') => `mysql://root@127.0.0.1:${m.port}/${db}`;
const pidFile = (m: MariadbInstance) => join(m.dir, 'mariadbd.pid');

function mariadbPid(m: MariadbInstance): number | null {
  const pid = Number.parseInt(existsSync(pidFile(m)) ? readFileSync(pidFile(m), 'utf8') : '', 10);
  if (!pid) return null;
  try {
    process.kill(pid, 0);
  } catch {
    return null;
  }
  const cmd = existsSync(`/proc/${pid}/cmdline`) ? readFileSync(`/proc/${pid}/cmdline`, 'utf8') : '';
  let exe = '';
  try {
    exe = readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return null;
  }
  // The server itself, not a wrapper that carries the same data dir in its arguments.
  return exe === MARIADBD && cmd.includes(m.dir) ? pid : null;
}

/** Creates the data directory once (system tables; root@127.0.0.1 with an empty password). */
async function mariadbInstall(m: MariadbInstance): Promise<void> {
  if (existsSync(join(m.dir, 'data', 'mysql'))) return;
  mkdirSync(m.dir, { recursive: true });
  await run(
    'mariadb-install-db',
    [
      '--no-defaults',
      `--datadir=${join(m.dir, 'data')}`,
      `--user=${userInfo().username}`,
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
    ],
    { timeout: 120_000 },
  );
}

/** Starts the private mariadbd (installing its data dir the first time) and waits until it answers. */
export async function mariadbStart(m: MariadbInstance): Promise<string> {
  await mariadbInstall(m);
  if (!mariadbPid(m)) {
    // start-stop-daemon execs mariadbd itself (no shell or node wrapper in between), so the pid
    // mariadbd writes is the server's, and --stop --exec below can only ever hit that binary.
    await run(
      'start-stop-daemon',
      [
        '--start',
        '--background',
        `--pidfile=${pidFile(m)}`,
        `--exec=${MARIADBD}`,
        `--output=${join(m.dir, 'mariadbd.log')}`,
        '--',
        '--no-defaults',
        `--datadir=${join(m.dir, 'data')}`,
        `--port=${m.port}`,
        '--bind-address=127.0.0.1',
        `--socket=${join(m.dir, 'sock')}`,
        `--pid-file=${pidFile(m)}`,
        `--user=${userInfo().username}`,
        '--skip-log-bin',
        '--innodb-buffer-pool-size=64M',
        '--max-connections=500',
        ...(m.args ?? []),
      ],
      { timeout: 30_000 },
    );
  }
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      const c = await mysql.createConnection({ uri: mariadbUrl(m), connectTimeout: 1000 });
      await c.query('SELECT 1');
      await c.end();
      return mariadbUrl(m);
    } catch (err) {
      if (Date.now() > deadline)
        throw new Error(`private MariaDB on ${m.port} did not answer: ${String(err)}; log ${join(m.dir, 'mariadbd.log')}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** SIGKILL (a crash: InnoDB recovers on the next start) or SIGTERM; waits for the process to end. */
export async function mariadbStop(m: MariadbInstance, kill: boolean): Promise<void> {
  const pid = mariadbPid(m);
  if (!pid) throw new Error(`the private MariaDB in ${m.dir} is not running`);
  // --exec: the signal goes only to a process whose executable is mariadbd, never to a reused pid.
  await run('start-stop-daemon', ['--stop', `--signal=${kill ? 'KILL' : 'TERM'}`, `--pidfile=${pidFile(m)}`, `--exec=${MARIADBD}`], {
    timeout: 30_000,
  });
  const deadline = Date.now() + 60_000;
  while (mariadbPid(m) === pid) {
    if (Date.now() > deadline) throw new Error(`private MariaDB (pid ${pid}) did not stop`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export { mariadbUrl };
