import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * docs/architecture.md "Who owns which table": each table's SQL is in the module (lib folder)
 * that owns it; other modules call its query functions. This reads every SQL statement in lib/
 * and every table the migrations create, so a query in the wrong module, or a new table nobody
 * owns, fails here with its file and table named.
 */
const ROOT = join(import.meta.dirname, '..', '..');

const OWNERS: Record<string, string[]> = {
  'lib/pipeline': ['proc_state', 'proc_attempt', 'proc_state_hst', 'backfill_todo', 'mailbox_gap', 'mailbox_late'],
  'lib/flights': [
    'flight_schd',
    'flight_hst',
    'schd_snap_log',
    'flight_gate',
    'flight_stnd',
    'flight_belt',
    'flight_chkc',
    'flight_brdg',
    'flight_lnge',
    'flight_dlay',
    'flight_rout',
    'flight_csfl',
  ],
  'lib/requests': ['req_track', 'ref_master'],
  'lib/outbox': ['msg_event', 'event_delivery', 'outbox_target', 'outbox_exception', 'outbox_batch'],
  'lib/txmsg': ['tx_message', 'tx_message_hst', 'tx_message_log', 'tx_idempotency'],
  'lib/audit': ['audit_log'],
  'lib/mailbox': ['CMINMSGS', 'COUTMSGS'],
};

/**
 * The documented exceptions, each with its reason (docs/architecture.md):
 * - msgx_state is a key–value table whose keys belong to modules: the pipeline's (mailbox.*,
 *   identity.*, pipeline.paused) and the flights history sweep's day.
 * - txmsg's settle pass joins its in-flight messages to their events in one statement (the
 *   relay's hook may not have told it; splitting the join would read every in-flight event).
 */
const SHARED: Record<string, string[]> = {
  msgx_state: ['lib/pipeline/', 'lib/flights/history.ts'],
  msg_event: ['lib/txmsg/store.ts'],
};

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** Tables the migrations create (PostgreSQL and both mailbox flavours). */
function migratedTables(): string[] {
  const sql = readdirSync(join(ROOT, 'migrations'), { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.sql'))
    .map((f) => readFileSync(join(ROOT, 'migrations', f), 'utf8'))
    .join('\n');
  return [...new Set([...sql.matchAll(/CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?[`"]?(\w+)/gi)].map((m) => m[1]!))];
}

/** [file, table] for every table named after FROM/JOIN/INTO/UPDATE/TABLE in lib/ (SQL keywords are upper case here). */
function references(tables: string[]): [string, string][] {
  const out: [string, string][] = [];
  const re = new RegExp(`\\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\\s+[\`"]?(${tables.join('|')})\\b`, 'g');
  for (const f of files(join(ROOT, 'lib'))) {
    const rel = relative(ROOT, f).split('\\').join('/');
    for (const m of readFileSync(f, 'utf8').matchAll(re)) out.push([rel, m[1]!]);
  }
  return out;
}

describe('table ownership', () => {
  const tables = migratedTables();
  const owner = new Map(Object.entries(OWNERS).flatMap(([dir, ts]) => ts.map((t) => [t, dir] as const)));

  it('every table the migrations create has an owner (or is a documented shared table)', () => {
    expect(tables.length).toBeGreaterThan(20);
    expect(tables.filter((t) => !owner.has(t) && !SHARED[t])).toEqual([]);
  });

  it("a table's SQL is only in the module that owns it", () => {
    const refs = references(tables);
    // The scan sees the SQL it is meant to see.
    expect(refs).toContainEqual(['lib/pipeline/procState.ts', 'proc_state']);
    expect(refs).toContainEqual(['lib/audit/audit.ts', 'audit_log']);
    const misplaced = refs
      .filter(([file, table]) => !(owner.has(table) && file.startsWith(`${owner.get(table)}/`)))
      .filter(([file, table]) => !(SHARED[table] ?? []).some((allowed) => file.startsWith(allowed)))
      .map(([file, table]) => `${file} uses ${table} (owner: ${owner.get(table) ?? 'shared by key'})`);
    expect([...new Set(misplaced)]).toEqual([]);
  });
});
