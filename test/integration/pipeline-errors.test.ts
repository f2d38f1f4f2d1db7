import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { AppContext } from '../../lib/app/context.ts';
import type { Db } from '../../lib/db/db.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { replayMessages } from '../../lib/pipeline/replay.ts';
import { ProcessorRegistry } from '../../lib/pipeline/processor.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { drainPoller, drainPump, makeContext, wire } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * A bug is the message's failure, an outage is nobody's (README "Operations", Errors), through the
 * real pump on PostgreSQL. Seen red: with asMsgxError turning every foreign error into a counted
 * INFRA, the TypeError message was FAILED(INFRA) and retried, and the outages spent attempts.
 */
let pg: TestPg;
let mailbox: PgMailbox;
let clock: FakeClock;
let ctx: AppContext & { clock: FakeClock };
let fixed = false;
let outages = 0;
const lines: Record<string, unknown>[] = [];

const registry = () =>
  new ProcessorRegistry().register('TEST', async ({ tx, msgId, message }) => {
    await tx.query(`INSERT INTO test_effect (msg_id) VALUES ($1)`, [msgId]);
    const what = JSON.stringify(message.body);
    if (what.includes('BUG') && !fixed) {
      const flight = undefined as unknown as { FLID: string };
      return { status: 'SUCCEEDED', note: flight.FLID }; // the bug: a TypeError
    }
    if (what.includes('DROP') && outages-- > 0)
      throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    if (what.includes('RAISE')) throw Object.assign(new Error('flight store unavailable (maintenance)'), { code: 'P0001' });
    return { status: 'SUCCEEDED' };
  });

beforeAll(async () => {
  pg = await freshPg();
  mailbox = new PgMailbox(pg.db);
  await mailbox.ensureTables();
  await pg.db.query(`CREATE TABLE test_effect (msg_id bigint NOT NULL)`);
});
afterAll(async () => pg?.drop());
beforeEach(async () => {
  await pg.db.query(`TRUNCATE proc_state, proc_state_hst, proc_attempt, backfill_todo, msgx_state, audit_log, test_effect, "CMINMSGS"`);
  clock = new FakeClock('2026-11-29T00:00:00Z');
  lines.length = 0;
  fixed = false;
  ctx = { ...makeContext({ db: pg.db, mailbox, clock, registry: registry() }), clock };
  const capture = (msg: unknown, ...extra: unknown[]): void =>
    void lines.push(typeof msg === 'string' ? { message: msg, ...(extra[0] as object) } : (msg as Record<string, unknown>));
  ctx.log = { debug() {}, info() {}, warn: capture, error: capture };
});

const post = (seqn: number, body: string) => mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: seqn }, `<TEST>${body}</TEST>`));
const drain = async () => {
  await drainPoller(ctx);
  return drainPump(ctx);
};
const row = async (id: number) =>
  (
    await pg.db.query<{ status: string; error_class: string | null; error_detail: string | null; attempts: number }>(
      `SELECT status, error_class, error_detail, attempts FROM proc_state WHERE msg_id = $1`,
      [id],
    )
  ).rows[0]!;

describe('a programming error', () => {
  it('is DEAD(UNSUPPORTED) at once, not retried; the FIFO goes on; its stack is logged once for two messages', async () => {
    const a = await post(1, '<X>BUG</X>');
    const b = await post(2, '<X>BUG</X>');
    const c = await post(3, '<X>fine</X>');
    await drain();
    for (const id of [a, b]) {
      const r = await row(id);
      expect(r).toMatchObject({ status: 'DEAD', error_class: 'UNSUPPORTED', attempts: 1 });
      expect(r.error_detail).toMatch(
        /^programming error \(not retried; replay once fixed\): TypeError: Cannot read properties of undefined/,
      );
    }
    expect(await row(c)).toMatchObject({ status: 'SUCCEEDED' });
    // Each message rolled back its own write (none is partly applied); the good one applied once.
    expect((await pg.db.query(`SELECT msg_id FROM test_effect ORDER BY msg_id`)).rows).toEqual([{ msg_id: c }]);
    const stacks = lines.filter((l) => l.message === 'programming_error');
    expect(stacks).toHaveLength(1);
    expect(stacks[0]).toMatchObject({ msg_id: a, error_class: 'UNSUPPORTED' });
    expect(String(stacks[0]!.stack)).toMatch(/TypeError: Cannot read properties of undefined[\s\S]*pipeline-errors\.test\.ts/);
    // Every message still has its own failed-attempt line.
    expect(lines.filter((l) => l.message === 'pipeline_attempt_failed').map((l) => l.msg_id)).toEqual([a, b]);
    // The mailbox is told, as for any dead message.
    const mailed = await pg.db.query<{ ID: number; PROC_STATUS: string }>(
      `SELECT "ID", "PROC_STATUS" FROM "CMINMSGS" WHERE "ID" = ANY($1) ORDER BY "ID"`,
      [[a, b]],
    );
    expect(mailed.rows.map((r) => r.PROC_STATUS)).toEqual(['DEAD', 'DEAD']);
  });

  it('is replayable once the code is fixed', async () => {
    const a = await post(4, '<X>BUG</X>');
    await drain();
    expect(await row(a)).toMatchObject({ status: 'DEAD', error_class: 'UNSUPPORTED' });
    fixed = true;
    const r = await replayMessages(ctx.db, { errorClass: 'UNSUPPORTED', dryRun: false }, 'test', ctx.clock.now());
    expect(r.moved.map((m) => m.msgId)).toEqual([a]);
    await drain();
    expect(await row(a)).toMatchObject({ status: 'SUCCEEDED', attempts: 1 }); // a replay starts its count again;
  });
});

describe('an outage is not a failure', () => {
  it('a lost database session during processing waits as FAILED(INFRA) without spending attempts, then succeeds', async () => {
    outages = ctx.config.pipeline.maxAttempts * 2;
    const a = await post(5, '<X>DROP</X>');
    for (let i = 0; i <= ctx.config.pipeline.maxAttempts * 2; i++) {
      await drain();
      clock.advance(ctx.config.pipeline.backoffMaxMs);
    }
    await drain();
    expect(await row(a)).toMatchObject({ status: 'SUCCEEDED', attempts: 1 });
    const tried = await pg.db.query<{ outcome: string; error_detail: string | null }>(
      `SELECT outcome, error_detail FROM proc_attempt WHERE msg_id = $1 ORDER BY id`,
      [a],
    );
    expect(tried.rows.length).toBeGreaterThan(ctx.config.pipeline.maxAttempts);
    expect(tried.rows.at(-1)).toMatchObject({ outcome: 'SUCCEEDED' });
    expect(tried.rows[0]!.error_detail).toMatch(/administrator command \(no attempt counted\)$/);
  });

  it('is still bounded by the head deadline', async () => {
    outages = Number.MAX_SAFE_INTEGER;
    const a = await post(6, '<X>DROP</X>');
    await drain();
    clock.advance(ctx.config.pipeline.headDeadlineMs);
    await drain();
    expect(await row(a)).toMatchObject({ status: 'DEAD', error_class: 'EXHAUSTED', attempts: 0 });
    expect((await row(a)).error_detail).toMatch(/head deadline passed/);
    outages = 0;
  });

  it('a statement the database refuses is not an outage: it counts and ends EXHAUSTED', async () => {
    const a = await post(7, '<X>RAISE</X>');
    for (let i = 0; i < ctx.config.pipeline.maxAttempts; i++) {
      await drain();
      clock.advance(ctx.config.pipeline.backoffMaxMs);
    }
    expect(await row(a)).toMatchObject({ status: 'DEAD', error_class: 'EXHAUSTED', attempts: ctx.config.pipeline.maxAttempts });
  });

  it('a transaction lost at commit holds the head without an attempt', async () => {
    const a = await post(8, '<X>fine</X>');
    await drainPoller(ctx);
    let commits = 0;
    const real = pg.db;
    const flaky: Db = {
      kind: real.kind,
      query: (sql, params) => real.query(sql, params),
      tx: async (fn) => {
        if (commits++ < 3) throw new Error('Connection terminated unexpectedly');
        return real.tx(fn);
      },
      listen: (c, f) => real.listen(c, f),
      localWake: (c, p) => real.localWake(c, p),
      session: () => real.session(),
      close: () => real.close(),
    };
    const down = { ...ctx, db: flaky };
    await drainPump(down);
    expect(await row(a)).toMatchObject({ status: 'FAILED', error_class: 'INFRA', attempts: 0 });
    expect((await row(a)).error_detail).toMatch(/Connection terminated unexpectedly \(no attempt counted\)/);
    clock.advance(ctx.config.pipeline.backoffMaxMs);
    await drainPump(down);
    expect(await row(a)).toMatchObject({ status: 'SUCCEEDED', attempts: 1 });
  });
});
