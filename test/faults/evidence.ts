/**
 * What a failed fault run leaves behind for whoever reads the failure: a directory under
 * test/artifacts/ (git-ignored) with the run's timeline (role starts, kills, crashes, service kills
 * and restarts, the excused windows, the sessions a kill aimed at), every invariant violation and
 * every role failure (excused or not), the role logs, the private services' logs (mariadbd's crash
 * recovery, the broker's server.log), and a dump of msgx's tables and of the mailbox. The run's
 * databases are kept too (named in README.txt), and globalSetup.ts keeps the private services'
 * directories when a KEEP file marks them.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { inject } from 'vitest';

const run = promisify(execFile);

/** One moment of a fault run, in the order it happened. */
export interface TimelineEntry {
  at: number;
  what: string;
}

/** The run's timeline: this module is loaded once per test file, so one timeline per file. */
export const timeline: TimelineEntry[] = [];

export function note(what: string): void {
  timeline.push({ at: Date.now(), what });
}

export const ARTIFACTS = resolve('test/artifacts');

export interface EvidenceSource {
  name: string;
  pgUrl: string;
  pgQuery(sql: string): Promise<Record<string, unknown>[]>;
  mailboxUrl: string;
  mailboxQuery(sql: string): Promise<Record<string, unknown>[]>;
  logDir: string;
  /** Every violation the run's invariant checks found, uncapped. */
  violations: string[];
  /**
   * The invariant check, run at evidence time when the test failed before it got to check (a
   * drain that timed out, a bound missed): what the state violates then is the best account.
   */
  check?: () => Promise<string[]>;
  failures: unknown[];
  /** The failed test's errors, as its report shows them. */
  errors: string[];
}

/** How long the evidence may spend on the late invariant check (topic reads; hookTimeout is 120 s). */
const LATE_CHECK_MS = 45_000;

const iso = (at: number) => new Date(at).toISOString();

/**
 * Writes the evidence of a failed test and returns its directory. Never throws: a dump that fails
 * (the mailbox may be down when the test failed) is recorded as such and the rest is still kept.
 */
export async function keepEvidence(s: EvidenceSource, test: string): Promise<string> {
  const slug = `${s.name}-${test.replace(/[^A-Za-z0-9]+/g, '-').slice(0, 60)}-${Date.now().toString(36)}`;
  const dir = join(ARTIFACTS, slug);
  mkdirSync(join(dir, 'tables'), { recursive: true });
  const problems: string[] = [];
  const attempt = async (what: string, fn: () => Promise<void> | void) => {
    try {
      await fn();
    } catch (err) {
      problems.push(`${what}: ${(err as Error).message}`);
    }
  };
  note(`test failed: ${test}; evidence kept in ${dir}`);
  writeFileSync(join(dir, 'timeline.txt'), timeline.map((e) => `${iso(e.at)} ${e.what}\n`).join(''));
  writeFileSync(join(dir, 'violations.json'), JSON.stringify(s.violations, null, 2));
  if (s.violations.length === 0 && s.check) {
    const check = s.check;
    await attempt('invariants at evidence time', async () => {
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not done within ${LATE_CHECK_MS} ms`)), LATE_CHECK_MS);
      });
      try {
        const found = await Promise.race([check(), limit]);
        writeFileSync(join(dir, 'violations-at-failure.json'), JSON.stringify(found, null, 2));
      } finally {
        clearTimeout(timer);
      }
    });
  }
  writeFileSync(join(dir, 'role-failures.json'), JSON.stringify(s.failures, null, 2));
  await attempt('role logs', () => cpSync(s.logDir, join(dir, 'roles'), { recursive: true }));
  const services = inject('faultServices');
  await attempt('service logs', () => {
    for (const [name, from] of [
      ['mariadb', services.mariadb.dir],
      ['kafka', services.kafka.dir],
    ] as const) {
      mkdirSync(join(dir, 'services', name), { recursive: true });
      for (const f of readdirSync(from))
        if (/\.(log|out)$/.test(f) && statSync(join(from, f)).isFile()) cpSync(join(from, f), join(dir, 'services', name, f));
    }
    // The service directories (data included) stay where they are: globalSetup.ts does not remove them.
    writeFileSync(join(services.root, 'KEEP'), `${dir}\n`);
  });
  // Whole dumps a reader can load again (schema and data), and every table as JSON lines to read.
  await attempt('pg_dump', () =>
    run('pg_dump', ['--no-owner', '--file', join(dir, 'postgres.sql'), s.pgUrl], { timeout: 60_000 }).then(() => {}),
  );
  const my = new URL(s.mailboxUrl);
  await attempt('mysqldump', async () => {
    const { stdout } = await run(
      'mysqldump',
      ['-h', my.hostname, '-P', my.port, '-u', decodeURIComponent(my.username) || 'root', '--single-transaction', my.pathname.slice(1)],
      { timeout: 60_000, maxBuffer: 512 * 1024 * 1024 },
    );
    writeFileSync(join(dir, 'mailbox.sql'), stdout);
  });
  await attempt('list of msgx tables', async () => {
    const tables = await s.pgQuery(
      `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`,
    );
    for (const { t } of tables)
      await attempt(`dump of ${String(t)}`, async () => {
        const rows = await s.pgQuery(`SELECT * FROM "${String(t)}"`);
        writeFileSync(join(dir, 'tables', `${String(t)}.jsonl`), rows.map((r) => JSON.stringify(r)).join('\n'));
      });
  });
  await attempt('list of mailbox tables', async () => {
    const tables = await s.mailboxQuery(`SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1`);
    for (const { t } of tables)
      await attempt(`dump of mailbox ${String(t)}`, async () => {
        const rows = await s.mailboxQuery(`SELECT * FROM \`${String(t)}\``);
        writeFileSync(join(dir, 'tables', `mailbox.${String(t)}.jsonl`), rows.map((r) => JSON.stringify(r)).join('\n'));
      });
  });
  writeFileSync(
    join(dir, 'README.txt'),
    [
      `fault run ${s.name}, failed test: ${test}`,
      ...s.errors.map((e) => `error: ${e}`),
      `PostgreSQL database kept: ${s.pgUrl}`,
      `mailbox database kept: ${s.mailboxUrl} (on the run's private MariaDB, directory ${services.mariadb.dir})`,
      `private services kept in ${services.root}`,
      ...problems.map((p) => `not kept: ${p}`),
      '',
    ].join('\n'),
  );
  process.stderr.write(`[faults] evidence of the failure kept in ${dir}\n`);
  return dir;
}
