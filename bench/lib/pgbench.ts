import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { serviceUrls } from './env.ts';

const run = promisify(execFile);

/**
 * Single-client commit rate of a two-statement transaction on the same server:
 * `pgbench -n -c1 -T<secs> -f <BEGIN; INSERT; UPDATE; COMMIT>` in a database of its own.
 */
export async function pgbenchCommitRate(seconds: number): Promise<number> {
  const base = new URL(serviceUrls().pgUrl);
  const name = `msgx_pgb_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: base.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const dir = mkdtempSync(join(tmpdir(), 'msgx-pgbench-'));
  try {
    const u = new URL(base.toString());
    u.pathname = `/${name}`;
    const c = new pg.Client({ connectionString: u.toString() });
    await c.connect();
    await c.query(`CREATE TABLE bench_log (id bigserial PRIMARY KEY, v text NOT NULL, at timestamptz NOT NULL DEFAULT now());
                   CREATE TABLE bench_counter (id int PRIMARY KEY, n bigint NOT NULL);
                   INSERT INTO bench_counter VALUES (1, 0);`);
    await c.end();
    const file = join(dir, 'tx.sql');
    writeFileSync(file, `BEGIN;\nINSERT INTO bench_log (v) VALUES ('x');\nUPDATE bench_counter SET n = n + 1 WHERE id = 1;\nCOMMIT;\n`);
    const { stdout } = await run(
      'pgbench',
      ['-h', base.hostname, '-p', base.port || '5432', '-U', base.username || 'postgres', '-n', '-c1', `-T${seconds}`, '-f', file, name],
      {
        env: { ...process.env, PGPASSWORD: decodeURIComponent(base.password) },
      },
    );
    const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout) ?? /tps = ([\d.]+)/.exec(stdout);
    if (!m) throw new Error(`pgbench output without tps:\n${stdout}`);
    return Number(m[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
}

/** Server settings that decide the commit cost, recorded with the results. */
export async function pgSettings(): Promise<Record<string, string>> {
  const c = new pg.Client({ connectionString: serviceUrls().pgUrl });
  await c.connect();
  try {
    const r = await c.query<{ name: string; setting: string; unit: string | null }>(
      `SELECT name, setting, unit FROM pg_settings WHERE name IN ('fsync','synchronous_commit','wal_sync_method','commit_delay','shared_buffers','max_connections','server_version')`,
    );
    return Object.fromEntries(r.rows.map((x) => [x.name, x.unit ? `${x.setting}${x.unit}` : x.setting]));
  } finally {
    await c.end();
  }
}
