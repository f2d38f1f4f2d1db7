/**
 * What a failed fault run leaves behind for whoever reads the failure: a directory under
 * test/artifacts/ (git-ignored) with the run's timeline (role starts, kills, crashes, service kills
 * and restarts, the excused windows, the sessions a kill aimed at), every invariant violation and
 * every role failure (excused or not), the role logs, the private services' logs (mariadbd's crash
 * recovery, the broker's server.log), and a dump of msgx's tables and of the mailbox. The run's
 * databases are kept too (named in README.txt), and globalSetup.ts keeps the private services'
 * directories when a KEEP file marks them.
 */
import { cpSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { inject } from 'vitest';

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

/** The tables of msgx a reader of a failure needs, dumped whole (a fault run's database is small). */
const PG_TABLES = ['proc_state', 'msg_event', 'backfill_todo', 'flight_schd', 'proc_state_hst'];

export interface EvidenceSource {
  name: string;
  pgUrl: string;
  pgQuery(sql: string): Promise<Record<string, unknown>[]>;
  mailboxUrl: string;
  mailboxQuery(sql: string): Promise<Record<string, unknown>[]>;
  logDir: string;
  violations: string[];
  failures: unknown[];
}

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
  writeFileSync(join(dir, 'timeline.txt'), timeline.map((e) => `${iso(e.at)} ${e.what}\n`).join(''));
  writeFileSync(join(dir, 'violations.json'), JSON.stringify(s.violations, null, 2));
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
  for (const t of PG_TABLES)
    await attempt(`dump of ${t}`, async () => {
      const rows = await s.pgQuery(`SELECT * FROM ${t}`);
      writeFileSync(join(dir, 'tables', `${t}.jsonl`), rows.map((r) => JSON.stringify(r)).join('\n'));
    });
  await attempt('dump of the mailbox', async () => {
    const rows = await s.mailboxQuery(`SELECT * FROM CMINMSGS ORDER BY ID`);
    writeFileSync(join(dir, 'tables', 'CMINMSGS.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n'));
  });
  writeFileSync(
    join(dir, 'README.txt'),
    [
      `fault run ${s.name}, failed test: ${test}`,
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
