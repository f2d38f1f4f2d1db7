import { Command } from 'commander';
import { loadConfig } from '../config/config.ts';
import { reaching } from '../app/serviceErrors.ts';
import { migrate } from '../db/migrate.ts';
import { openDb } from '../db/open.ts';
import { cliActor } from '../http/actor.ts';
import { readIdentityMode, setIdentityMode } from '../pipeline/identityMode.ts';
import { type AdminApi, AdminCallError, openAdminApi } from './admin.ts';
import { renderDead, renderTrace, renderTxTrace } from './render.ts';
import { renderStatus, type StatsView } from './status.ts';
import { keyValues, table } from './table.ts';
import type { MessageTrace, TimelineEntry } from '../observability/trace.ts';
import type { TraceEventView } from '../outbox/sourceEvents.ts';
import type { TxMessageView } from '../txmsg/view.ts';

const program = new Command()
  .name('msgx')
  .description('Operate msgx: migrations, status, dead letters, replay, requests, pause and resume.')
  .option('--sigv4', 'sign calls to the cloud API (MSGX_API_URL) with SigV4 (automatic for an execute-api host; region: AWS_REGION)')
  .showHelpAfterError();

async function withApi(fn: (api: AdminApi) => Promise<void>): Promise<void> {
  const api = await openAdminApi(process.env, { sigv4: program.opts<{ sigv4?: boolean }>().sigv4 });
  try {
    await fn(api);
  } finally {
    await api.close();
  }
}

program
  .command('migrate')
  .description('apply pending PostgreSQL migrations (MSGX_PG_URL, or the embedded database when the twin is stopped)')
  .action(async () => {
    const config = loadConfig({ ...process.env, MSGX_RUNTIME: 'twin' });
    const db = await openDb(config);
    try {
      const r = await reaching('MSGX_PG_URL', config.pgUrl ?? '', () =>
        migrate(db, { onProgress: (name, i, n) => process.stderr.write(`[${i}/${n}] ${name}\n`) }),
      );
      process.stdout.write(r.applied.length ? `applied ${r.applied.length} migration(s)\n` : `up to date (${r.alreadyApplied} applied)\n`);
    } finally {
      await db.close();
    }
  });

program
  .command('identity')
  .description(
    'show or switch the identity algorithm (MSGX_IDENTITY_DAY_BOUNDARY): it changes which messages are duplicates, so a start refuses a setting that differs from the recorded one until it is switched here (MSGX_PG_URL, or the embedded database when the twin is stopped)',
  )
  .option('--day-boundary <onOff>', 'on: SNDR|TYPE|STYP|SEQN|<DTTM day>; off: SNDR|TYPE|STYP|SEQN')
  .action(async (o: { dayBoundary?: string }) => {
    if (o.dayBoundary !== undefined && !['on', 'off'].includes(o.dayBoundary))
      throw new Error(`--day-boundary must be on or off (got ${o.dayBoundary})`);
    const config = loadConfig({ ...process.env, MSGX_RUNTIME: 'twin' });
    const db = await openDb(config);
    try {
      await reaching('MSGX_PG_URL', config.pgUrl ?? '', () => migrate(db));
      if (o.dayBoundary === undefined) {
        const mode = await readIdentityMode(db);
        process.stdout.write(`identity day boundary: ${mode === undefined ? 'not recorded yet' : mode ? 'on' : 'off'}\n`);
        return;
      }
      const r = await setIdentityMode(db, o.dayBoundary === 'on', cliActor(), new Date());
      const from = r.from === undefined ? 'not recorded' : r.from ? 'on' : 'off';
      process.stdout.write(
        `identity day boundary: ${from} -> ${o.dayBoundary}; set MSGX_IDENTITY_DAY_BOUNDARY=${o.dayBoundary} for every process (new messages only; bound identities stay as they are)\n`,
      );
    } finally {
      await db.close();
    }
  });

program
  .command('status')
  .description('backlog, head message and its age, events pending per target, dead counts, transactional messages per state')
  .option('--json', 'print JSON instead of tables')
  .action(async (o: { json?: boolean }) =>
    withApi(async (api) => {
      const s = await api.call<StatsView>('GET', '/admin/stats');
      if (o.json) return void process.stdout.write(`${JSON.stringify(s, null, 2)}\n`);
      process.stdout.write(renderStatus(s));
    }),
  );

program
  .command('dead')
  .description('list dead letters (a table that fits 120 columns, reasons cut; --json for whole rows)')
  .option('--kind <kind>', 'proc | event | txmsg', 'proc')
  .option('--class <errorClass>', 'only this error class (proc)')
  .option('--phase <phase>', 'txmsg: check (died unconfirmed) | delivery (died after commit)')
  .option('--topic <topic>', 'txmsg: only this topic')
  .option('--limit <n>', 'at most this many', '50')
  .option('--json', 'print the whole rows as JSON instead of a table')
  .action(async (o: { kind: string; class?: string; phase?: string; topic?: string; limit: string; json?: boolean }) =>
    withApi(async (api) => {
      const q = new URLSearchParams({
        kind: o.kind,
        limit: o.limit,
        ...(o.class ? { errorClass: o.class } : {}),
        ...(o.phase ? { phase: o.phase } : {}),
        ...(o.topic ? { topic: o.topic } : {}),
      });
      const r = await api.call<{ items: Record<string, unknown>[] }>('GET', `/admin/dead?${q}`);
      if (o.json) return void process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
      process.stdout.write(`${renderDead(o.kind, r.items)}\n`);
    }),
  );

program
  .command('replay')
  .description('move dead or failed messages (proc) or events (event) back to PENDING')
  .requiredOption('--kind <kind>', 'proc | event')
  .option('--class <errorClass>', 'every replayable message of this class (CODEC_ERROR, UNSUPPORTED, INFRA, EXHAUSTED)')
  .option('--ids <ids>', 'comma list of IDs')
  .option('--target <target>', 'events of this target (event)')
  .option('--dry-run', 'only show what would move')
  .action(async (o: { kind: string; class?: string; ids?: string; target?: string; dryRun?: boolean }) =>
    withApi(async (api) => {
      const body = {
        kind: o.kind,
        dryRun: Boolean(o.dryRun),
        ...(o.class ? { errorClass: o.class } : {}),
        ...(o.target ? { target: o.target } : {}),
        ...(o.ids ? { ids: o.ids.split(',').map((s) => Number(s.trim())) } : {}),
      };
      const r = await api.call<{ moved: Record<string, unknown>[]; refused?: Record<string, unknown>[]; warnings?: string[] }>(
        'POST',
        '/admin/replay',
        body,
      );
      process.stdout.write(`${o.dryRun ? 'would move' : 'moved'} ${r.moved.length}\n${table(r.moved)}\n`);
      if (r.refused?.length) process.stdout.write(`\nrefused ${r.refused.length}\n${table(r.refused)}\n`);
      for (const w of r.warnings ?? []) process.stdout.write(`\nwarning: ${w}\n`);
    }),
  );

program
  .command('resend <txId>')
  .description(
    'resend a dead transactional message: one that died unconfirmed is checked back again (PREPARED), a delivered one gets a fresh delivery schedule (COMMITTED); audited with your name',
  )
  .action(async (id: string) =>
    withApi(async (api) => {
      const r = await api.call<{ id: string; status: string; from: string }>('POST', `/admin/tx-messages/${encodeURIComponent(id)}/resend`);
      const next = r.status === 'PREPARED' ? 'it will be checked back with its producer' : 'it will be delivered again';
      // `from` is the phase it died in: check (unconfirmed) or delivery (unacknowledged).
      process.stdout.write(`${keyValues({ id: r.id, was: `DEAD (${r.from})`, now: r.status })}\n${next}\n`);
    }),
  );

program
  .command('request-day <day>')
  .description('ask upstream for the flights of a day (writes an RQFD to COUTMSGS)')
  .action(async (day: string) =>
    withApi(async (api) => {
      const r = await api.call<Record<string, unknown>>('POST', '/admin/requests', { day });
      process.stdout.write(`${keyValues(r)}\n`);
    }),
  );

program
  .command('trace <msgId>')
  .description('the path of one inbound message: the message, its attempts, flight changes, events and backfill')
  .option('--tx', 'trace a transactional message instead')
  .option('--json', 'print the whole trace as JSON (every field, and the timeline) instead of the summary')
  .action(async (id: string, o: { tx?: boolean; json?: boolean }) =>
    withApi(async (api) => {
      const r = await api.call<Record<string, unknown>>(
        'GET',
        o.tx ? `/admin/tx-messages/${encodeURIComponent(id)}/trace` : `/admin/trace/${encodeURIComponent(id)}`,
      );
      if (o.json) return void process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
      if (!o.tx) return void process.stdout.write(renderTrace(r as unknown as MessageTrace));
      const q = new URLSearchParams({ sourceKind: 'txmsg', sourceId: id });
      const events = await api.call<{ items: TraceEventView[] }>('GET', `/admin/events?${q}`);
      process.stdout.write(renderTxTrace(r as unknown as { message: TxMessageView; trace: TimelineEntry[] }, events.items));
    }),
  );

for (const [name, paused] of [
  ['pause', true],
  ['resume', false],
] as const) {
  program
    .command(name)
    .description(
      paused ? 'stop head processing; the ingress keeps accepting, delivery, check-backs and maintenance go on' : 'resume head processing',
    )
    .action(async () =>
      withApi(async (api) => {
        // The admin route is the one way to pause: the flag in PostgreSQL is the whole of it
        // (docs/deploy.md "Pause"), so what the route answered is what happened.
        const r = await api.call<{ paused: boolean; changed: boolean }>('POST', paused ? '/admin/pause' : '/admin/resume');
        const state = r.paused ? 'paused: no head processing; ingress, delivery and check-backs go on' : 'running';
        process.stdout.write(`pipeline ${r.changed ? '' : 'was already '}${state} (${api.mode})\n`);
      }),
    );
}

program.parseAsync().catch((err) => {
  process.stderr.write(`msgx: ${err instanceof AdminCallError ? err.message : err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
