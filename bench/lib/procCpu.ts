import { readdirSync, readFileSync } from 'node:fs';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { kafkaPid } from '../../scripts/services.mjs';

/**
 * CPU used by each process on the message path, read from /proc: the twin, the PostgreSQL server
 * (the postmaster, its live backends and the backends that already exited), the MariaDB server
 * and the Kafka broker. Seconds of user + system time since the process started; a scenario
 * takes two readings and divides the difference by the messages in between.
 */
export type CpuProcess = 'twin' | 'postgres' | 'mariadb' | 'broker';
export type CpuReading = Record<CpuProcess, number>;

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** utime, stime, cutime, cstime of one process, in clock ticks (fields 14-17 of /proc/<pid>/stat). */
function times(pid: number): { self: number; reaped: number; ppid: number } | null {
  let f: string;
  try {
    f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // exited between the listing and the read
  }
  const v = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(v[1]), self: Number(v[11]) + Number(v[12]), reaped: Number(v[13]) + Number(v[14]) };
}

/** A server and every process it forked: a backend that exited is in the parent's reaped time. */
function treeSeconds(rootPid: number): number {
  const root = times(rootPid);
  if (!root) return Number.NaN;
  let ticks = root.self + root.reaped;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const t = times(Number(name));
    if (t && t.ppid === rootPid) ticks += t.self;
  }
  return ticks / TICKS_PER_SECOND;
}

function selfSeconds(pid: number | null): number {
  const t = pid ? times(pid) : null;
  return t ? t.self / TICKS_PER_SECOND : Number.NaN;
}

/**
 * A broker started from another checkout (its pid file is not ours): the Kafka process whose
 * server.properties listens on `host:port`.
 */
function brokerByPort(hostPort: string): number | null {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let args: string[];
    try {
      args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    const main = args.indexOf('kafka.Kafka');
    if (main < 0) continue;
    const props = args[main + 1];
    try {
      if (props && readFileSync(props, 'utf8').includes(`//${hostPort}`)) return Number(name);
    } catch {
      // unreadable config: not ours to measure
    }
  }
  return null;
}

export interface CpuProbe {
  read(): CpuReading;
}

/** Finds the servers behind the URLs the scenario uses (their pid files), once. */
export async function cpuProbe(o: { twinPid: number; pgUrl: string; mysqlUrl?: string; kafkaBroker: string }): Promise<CpuProbe> {
  const client = new pg.Client({ connectionString: o.pgUrl });
  await client.connect();
  let postmaster: number;
  try {
    const dir = (await client.query<{ d: string }>(`SELECT current_setting('data_directory') AS d`)).rows[0]!.d;
    postmaster = Number.parseInt(readFileSync(`${dir}/postmaster.pid`, 'utf8').split('\n')[0]!, 10);
  } finally {
    await client.end();
  }
  let mariadb: number | null = null;
  if (o.mysqlUrl) {
    const conn = await mysql.createConnection({ uri: o.mysqlUrl });
    try {
      const [rows] = await conn.query('SELECT @@pid_file AS f');
      const file = (rows as { f: string }[])[0]!.f;
      mariadb = Number.parseInt(readFileSync(file, 'utf8').trim(), 10);
    } finally {
      await conn.end();
    }
  }
  const broker = kafkaPid() ?? brokerByPort(o.kafkaBroker);
  return {
    read: () => ({
      twin: selfSeconds(o.twinPid),
      postgres: treeSeconds(postmaster),
      mariadb: selfSeconds(mariadb),
      broker: selfSeconds(broker),
    }),
  };
}

/** Microseconds of CPU per message by process between two readings, and their sum. */
export function cpuPerMessage(before: CpuReading, after: CpuReading, messages: number): CpuReading & { total: number } {
  const per = (k: CpuProcess) => ((after[k] - before[k]) * 1e6) / messages;
  const r = { twin: per('twin'), postgres: per('postgres'), mariadb: per('mariadb'), broker: per('broker') };
  return { ...r, total: Object.values(r).reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0) };
}
