import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { archiveProcState } from '../../lib/pipeline/procArchive.ts';
import { buildContext, closeContext } from '../../lib/app/buildContext.ts';
import { ConfigError } from '../../lib/shared/errors.ts';
import { drainPoller, drainPump, makeContext } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';
import { createEffectTables, testRegistry } from '../helpers/testProcessors.ts';

/**
 * The identity's day boundary (docs/glossary.md "day boundary", README "Operations"): MSGX_IDENTITY_DAY_BOUNDARY, off by default. With
 * it on, an upstream that restarts SEQN every day is not mistaken for sending duplicates; and
 * once messages exist, a start with the other setting is refused until `npx msgx identity` runs.
 */
const run = promisify(execFile);
let pg: TestPg;
beforeAll(async () => (pg = await freshPg()));
afterAll(async () => pg?.drop());

const msg = (seqn: number, dttm: string) =>
  `<MSG><META><SNDR>FIMS</SNDR><SEQN>${seqn}</SEQN><DTTM>${dttm}</DTTM><TYPE>TEST</TYPE></META><TEST/></MSG>`;

/** Posts the texts into a fresh mailbox schema's CMINMSGS, runs the pipeline, returns PROC_STATUS/PROC_NOTE per row. */
async function outcomes(env: Record<string, string>, texts: string[]) {
  await pg.db.query(
    `DROP TABLE IF EXISTS "CMINMSGS", "COUTMSGS"; TRUNCATE proc_state, proc_state_hst, proc_attempt, backfill_todo, msgx_state, audit_log`,
  );
  const mailbox = new PgMailbox(pg.db);
  await mailbox.ensureTables();
  await createEffectTables(pg.db);
  const ctx = makeContext({ db: pg.db, mailbox, registry: testRegistry(), env: { MSGX_LOG_LEVEL: 'SILENT', ...env } });
  for (const t of texts) await mailbox.insertInbound(t);
  await drainPoller(ctx);
  await drainPump(ctx);
  const r = await pg.db.query<{ PROC_STATUS: string; PROC_NOTE: string | null }>(
    `SELECT "PROC_STATUS", "PROC_NOTE" FROM "CMINMSGS" ORDER BY "ID"`,
  );
  return r.rows.map((x) => `${x.PROC_STATUS}${x.PROC_NOTE?.startsWith('duplicate-of:') ? ' duplicate' : ''}`);
}

describe('duplicate semantics', () => {
  // SEQN 7 on the 29th, SEQN 7 again on the 30th (upstream restarted its counter), then the 29th's again.
  const texts = [msg(7, '20261129080000'), msg(7, '20261130080000'), msg(7, '20261129230000')];

  it('off (default): SNDR|TYPE|STYP|SEQN — the same SEQN on another day is a duplicate', async () => {
    expect(await outcomes({}, texts)).toEqual(['SUCCEEDED', 'SKIPPED duplicate', 'SKIPPED duplicate']);
  });

  it('on: the DTTM day is part of the identity — a new day is a new message, the same day still a duplicate', async () => {
    expect(await outcomes({ MSGX_IDENTITY_DAY_BOUNDARY: 'on' }, texts)).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SKIPPED duplicate']);
  });
});

describe('duplicates of an archived message, and what is not a duplicate', () => {
  const typed = (sndr: string, styp: string, seqn: number) =>
    `<MSG><META><SNDR>${sndr}</SNDR><SEQN>${seqn}</SEQN><DTTM>20261129080000</DTTM><TYPE>TEST</TYPE>${styp ? `<STYP>${styp}</STYP>` : ''}</META><TEST/></MSG>`;

  it('the original archived to proc_state_hst, then sent again through the pump: SKIPPED duplicate, applied once', async () => {
    const original = typed('FIMS', '', 41);
    expect(await outcomes({}, [original])).toEqual(['SUCCEEDED']);
    // Archived as the sweep would, long after it finished: proc_state no longer holds it.
    expect(await archiveProcState(pg.db, { now: new Date(Date.now() + 30 * 86_400_000), retentionDays: 1 })).toBe(1);
    const mailbox = new PgMailbox(pg.db);
    const ctx = makeContext({ db: pg.db, mailbox, registry: testRegistry(), env: { MSGX_LOG_LEVEL: 'SILENT' } });
    await mailbox.insertInbound(original);
    await drainPoller(ctx);
    await drainPump(ctx);
    const r = await pg.db.query<{ PROC_STATUS: string; PROC_NOTE: string | null }>(
      `SELECT "PROC_STATUS", "PROC_NOTE" FROM "CMINMSGS" ORDER BY "ID"`,
    );
    expect(r.rows.map((x) => [x.PROC_STATUS, x.PROC_NOTE?.replace(/\d+/g, 'N') ?? null])).toEqual([
      ['SUCCEEDED', null],
      ['SKIPPED', 'duplicate-of:N'],
    ]);
  });

  it('the same SEQN from another SNDR or under another STYP is a message of its own', async () => {
    expect(await outcomes({}, [typed('FIMS', '', 42), typed('AODB', '', 42), typed('FIMS', 'X', 42), typed('FIMS', 'X', 42)])).toEqual([
      'SUCCEEDED',
      'SUCCEEDED',
      'SUCCEEDED',
      'SKIPPED duplicate',
    ]);
  });
});

describe('cannot be flipped at start once messages exist', () => {
  const env = (dayBoundary: string) => ({ MSGX_PG_URL: pg.url, MSGX_LOG_LEVEL: 'SILENT', MSGX_IDENTITY_DAY_BOUNDARY: dayBoundary });
  const start = async (dayBoundary: string) => {
    const ctx = await buildContext(loadConfig(env(dayBoundary)), { poolSize: 2 });
    await closeContext(ctx);
  };
  const cli = (...args: string[]) =>
    run(process.execPath, ['bin/msgx.mjs', ...args], { env: { ...process.env, ...env('0') }, cwd: process.cwd() });

  it('refuses with one line naming the command; `npx msgx identity` switches it, audited', async () => {
    // Messages identified with the day boundary off exist.
    expect(await outcomes({}, [msg(1, '20261129080000')])).toEqual(['SUCCEEDED']);
    await start('0'); // the same setting starts, and records it

    const refused = await start('1').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ConfigError);
    const text = (refused as Error).message;
    expect(text).not.toContain('\n');
    expect(text).toContain('MSGX_IDENTITY_DAY_BOUNDARY is on');
    expect(text).toContain('npx msgx identity --day-boundary on');

    const shown = await cli('identity');
    expect(shown.stdout).toBe('identity day boundary: off\n');
    const switched = await cli('identity', '--day-boundary', 'on');
    expect(switched.stdout).toMatch(/^identity day boundary: off -> on;/);
    await start('1');
    await expect(start('0')).rejects.toThrow(/npx msgx identity --day-boundary off/);
    const audit = await pg.db.query(`SELECT action, detail FROM audit_log WHERE action = 'identity.day-boundary'`);
    expect(audit.rows).toEqual([{ action: 'identity.day-boundary', detail: { from: 'off', to: 'on' } }]);
    await expect(cli('identity', '--day-boundary', 'maybe')).rejects.toMatchObject({
      stderr: expect.stringContaining('--day-boundary must be on or off'),
    });
  }, 60_000);

  it('an empty store records whatever is configured, so a new installation may start with it on', async () => {
    await pg.db.query(`TRUNCATE proc_state, proc_state_hst, msgx_state`);
    await start('1');
    await start('1');
    await expect(start('0')).rejects.toThrow(ConfigError);
  });
});
