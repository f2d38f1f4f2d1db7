import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Mailbox } from '../../lib/mailbox/mailbox.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { archiveProcState } from '../../lib/pipeline/procArchive.ts';
import { pumpOnce } from '../../lib/pipeline/pump.ts';
import { pumpRole } from '../../lib/jobs/roles.ts';
import { rescanOnce } from '../../lib/pipeline/rescan.ts';
import { setPaused } from '../../lib/pipeline/pause.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { drainPoller, drainPump, mailboxWith, makeContext, wire } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, type TestMysql, type TestPg } from '../helpers/services.ts';
import { createEffectTables, testRegistry } from '../helpers/testProcessors.ts';

/**
 * What the pipeline guarantees (docs/architecture.md "An inbound message"), through the pump, on real PostgreSQL with the mailbox
 * in MariaDB and in PostgreSQL.
 */
describe.each(['mysql', 'pg'] as const)('inbox pipeline (mailbox in %s)', (mailboxKind) => {
  let pg: TestPg;
  let my: TestMysql | undefined;
  let mailbox: Mailbox;
  let clock: FakeClock;
  let ctx: AppContext;

  beforeAll(async () => {
    pg = await freshPg();
    if (mailboxKind === 'mysql') {
      my = await freshMysql();
      mailbox = my.mailbox;
    } else {
      mailbox = new PgMailbox(pg.db);
      await (mailbox as PgMailbox).ensureTables();
    }
    await createEffectTables(pg.db);
  });
  afterAll(async () => {
    await my?.drop();
    await pg.drop();
  });
  beforeEach(async () => {
    // Each test starts from an empty queue and mailbox, in the same databases.
    await pg.db.query(`TRUNCATE proc_state, proc_state_hst, proc_attempt, backfill_todo, msgx_state, audit_log, test_effect`);
    if (my) {
      await my.query('DELETE FROM CMINMSGS');
    } else await pg.db.query(`TRUNCATE "CMINMSGS"`);
    clock = new FakeClock('2026-11-29T00:00:00Z');
    ctx = makeContext({ db: pg.db, mailbox, clock, registry: testRegistry() });
  });

  const post = (xml: string) => mailbox.insertInbound(xml);
  const states = async () =>
    (
      await pg.db.query<{ msg_id: number; status: string; error_class: string | null; note: string | null; attempts: number }>(
        `SELECT msg_id, status, error_class, note, attempts FROM proc_state ORDER BY msg_id`,
      )
    ).rows;
  const effects = async () =>
    (await pg.db.query<{ msg_id: number }>(`SELECT msg_id FROM test_effect ORDER BY applied_at, msg_id`)).rows.map((r) => r.msg_id);

  it('processes in ID order with the right terminal state for each kind of message', async () => {
    const ids = [
      await post(wire({ TYPE: 'TEST', SEQN: 1 })),
      await post(wire({ TYPE: 'TEST', SEQN: 1 })), // same identity: duplicate
      await post('<MSG><META><SNDR>FIMS</SNDR>'), // not well-formed
      await post('<MSG><META><SNDR>FIMS</SNDR><TYPE>TEST</TYPE></META></MSG>'), // no SEQN
      await post(wire({ TYPE: 'LDM', SEQN: 7 })), // ignored type
      await post(wire({ TYPE: 'TEST', SEQN: 2 }, '<TEST><SKIP>nothing to do</SKIP></TEST>')),
      await post(wire({ TYPE: 'TEST', SEQN: 3 }, '<TEST><FAIL>PROTOCOL</FAIL></TEST>')),
      await post(wire({ TYPE: 'TEST', SEQN: 4 })),
      await post(`${wire({ TYPE: 'TEST', SEQN: 5 })}<MSG/>`), // two root elements: not well-formed
      await post(wire({ TYPE: 'FLOP', SEQN: 6 }, '<FLOP><FLIGHT><FLID>1</FLID></FLIGHT></FLOP>')), // FLOP without STYP
    ];
    expect(await drainPoller(ctx)).toBe(ids.length);
    expect((await drainPump(ctx)).kind).toBe('idle');

    const s = await states();
    expect(s.map((r) => [r.status, r.error_class ?? r.note])).toEqual([
      ['SUCCEEDED', null],
      ['SKIPPED', `duplicate-of:${ids[0]}`],
      ['DEAD', 'MALFORMED'],
      ['DEAD', 'MALFORMED'],
      ['SKIPPED', 'ignored-type:LDM'],
      ['SKIPPED', 'nothing to do'],
      ['DEAD', 'PROTOCOL'],
      ['SUCCEEDED', null],
      ['DEAD', 'MALFORMED'],
      ['DEAD', 'PROTOCOL'],
    ]);
    // The PROTOCOL message's write was rolled back to its savepoint; the others' stayed.
    expect(await effects()).toEqual([ids[0], ids[5], ids[7]]);
    // Every terminal row is back-filled with its status and reason.
    expect(await mailbox.filterUnprocessed(ids)).toEqual([]);
    const texts = await mailbox.readTexts([ids[2]!]);
    expect(texts.get(ids[2]!)).toContain('<MSG>');
  });

  it('holds the head on a retriable failure, backs off 1, 2, 4, 8 s, then DEAD(EXHAUSTED) with the last class', async () => {
    const bad = await post(wire({ TYPE: 'TEST', SEQN: 10 }, '<TEST><FAIL>INFRA</FAIL></TEST>'));
    const next = await post(wire({ TYPE: 'TEST', SEQN: 11 }));
    await drainPoller(ctx);

    const waits: number[] = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      const step = await drainPump(ctx);
      expect(step.kind).toBe('waiting');
      if (step.kind !== 'waiting') return;
      expect(step.msgId).toBe(bad);
      waits.push(step.untilMs - clock.now().getTime());
      // Nothing behind the failing head moved.
      expect((await states()).find((r) => r.msg_id === next)!.status).toBe('PENDING');
      clock.advance(step.untilMs - clock.now().getTime());
    }
    expect(waits).toEqual([1000, 2000, 4000, 8000]);
    expect((await drainPump(ctx)).kind).toBe('idle');
    const [dead, ok] = await states();
    expect(dead).toMatchObject({ status: 'DEAD', error_class: 'EXHAUSTED', attempts: 5 });
    const detail = await pg.db.query<{ error_detail: string }>(`SELECT error_detail FROM proc_state WHERE msg_id = $1`, [bad]);
    expect(detail.rows[0]!.error_detail).toMatch(/^INFRA: test infra failure \(after 5 attempts\)/);
    expect(ok).toMatchObject({ status: 'SUCCEEDED' });
    expect(await effects()).toEqual([next]);
  });

  it('declares a head DEAD(EXHAUSTED) once the head deadline has passed since its first attempt', async () => {
    ctx = makeContext({ db: pg.db, mailbox, clock, registry: testRegistry(), env: { MSGX_HEAD_DEADLINE: '3s', MSGX_MAX_ATTEMPTS: '50' } });
    await post(wire({ TYPE: 'TEST', SEQN: 20 }, '<TEST><FAIL>INFRA</FAIL></TEST>'));
    await drainPoller(ctx);
    let step = await drainPump(ctx); // attempt 1 at t=0, next at 1 s
    clock.advance(1000);
    step = await drainPump(ctx); // attempt 2 at t=1 s, next at 3 s
    expect(step.kind).toBe('waiting');
    clock.advance(2000);
    step = await drainPump(ctx); // attempt 3 at t=3 s: deadline reached
    expect(step.kind).toBe('idle');
    const [row] = await states();
    expect(row).toMatchObject({ status: 'DEAD', error_class: 'EXHAUSTED', attempts: 3 });
  });

  it('a retry keeps its own identity binding and succeeds once; a later copy is a duplicate', async () => {
    const first = await post(wire({ TYPE: 'TEST', SEQN: 30 }, '<TEST><FAILTIMES>2</FAILTIMES></TEST>'));
    const copy = await post(wire({ TYPE: 'TEST', SEQN: 30 }, '<TEST><FAILTIMES>2</FAILTIMES></TEST>'));
    await drainPoller(ctx);
    for (let i = 0; i < 2; i++) {
      const step = await drainPump(ctx);
      expect(step.kind).toBe('waiting');
      clock.advance(60_000);
    }
    expect((await drainPump(ctx)).kind).toBe('idle');
    const s = await states();
    expect(s).toEqual([
      expect.objectContaining({ msg_id: first, status: 'SUCCEEDED', attempts: 3 }),
      expect.objectContaining({ msg_id: copy, status: 'SKIPPED', note: `duplicate-of:${first}` }),
    ]);
    expect(await effects()).toEqual([first]);
  });

  it('a copy sent after its original was archived is still a duplicate; the same SEQN from another SNDR or STYP is not', async () => {
    const first = await post(wire({ TYPE: 'TEST', SEQN: 110 }));
    await drainPoller(ctx);
    expect((await drainPump(ctx)).kind).toBe('idle');
    // The archive sweep moves the finished original to proc_state_hst (retention passed).
    expect(await archiveProcState(pg.db, { now: new Date(clock.now().getTime() + 31 * 86_400_000), retentionDays: 30 })).toBe(1);
    expect(await states()).toEqual([]);
    const copy = await post(wire({ TYPE: 'TEST', SEQN: 110 }));
    const otherSender = await post(wire({ SNDR: 'AODB', TYPE: 'TEST', SEQN: 110 }));
    const otherSubtype = await post(wire({ TYPE: 'TEST', STYP: 'ALT', SEQN: 110 }));
    const copyAgain = await post(wire({ SNDR: 'AODB', TYPE: 'TEST', SEQN: 110 }));
    await drainPoller(ctx);
    expect((await drainPump(ctx)).kind).toBe('idle');
    expect((await states()).map((r) => [r.msg_id, r.status, r.note])).toEqual([
      [copy, 'SKIPPED', `duplicate-of:${first}`],
      [otherSender, 'SUCCEEDED', null],
      [otherSubtype, 'SUCCEEDED', null],
      [copyAgain, 'SKIPPED', `duplicate-of:${otherSender}`],
    ]);
    // Applied once each: the original, and the two messages of other identities.
    expect(await effects()).toEqual([first, otherSender, otherSubtype]);
  });

  it('unknown kinds are FAILED(UNSUPPORTED) and hold the head under the attempt limit', async () => {
    await post(wire({ TYPE: 'WXYZ', SEQN: 1 }));
    await post(wire({ TYPE: 'TEST', SEQN: 40 }));
    await drainPoller(ctx);
    const step = await drainPump(ctx);
    expect(step.kind).toBe('waiting');
    const s = await states();
    expect(s.map((r) => [r.status, r.error_class])).toEqual([
      ['FAILED', 'UNSUPPORTED'],
      ['PENDING', null],
    ]);
  });

  it('repeated scans enqueue once; an interrupted enqueue is found by the poller; a row msgx never saw below the frontier is found by the re-scan', async () => {
    const a = await post(wire({ TYPE: 'TEST', SEQN: 50 }));
    expect(await drainPoller(ctx)).toBe(1);
    expect(await drainPoller(ctx)).toBe(0);
    // The ingress wrote the mailbox but crashed before enqueueing: the poller enqueues it.
    const b = await post(wire({ TYPE: 'TEST', SEQN: 51 }));
    const c = await post(wire({ TYPE: 'TEST', SEQN: 52 }));
    expect(await drainPoller(ctx)).toBe(2);
    // A row below the frontier that msgx never saw (here: put back under an ID already passed): the sweep's re-scan finds it.
    const late = b + 0; // reuse the gap below c by deleting and re-inserting with an explicit ID
    if (my) {
      await my.query('DELETE FROM CMINMSGS WHERE ID = ?', [b]);
      await pg.db.query(`DELETE FROM proc_state WHERE msg_id = $1`, [b]);
      await my.query('INSERT INTO CMINMSGS (ID, MSG_TEXT) VALUES (?, ?)', [late, wire({ TYPE: 'TEST', SEQN: 53 })]);
    } else {
      await pg.db.query(`DELETE FROM "CMINMSGS" WHERE "ID" = $1`, [b]);
      await pg.db.query(`DELETE FROM proc_state WHERE msg_id = $1`, [b]);
      await pg.db.query(`INSERT INTO "CMINMSGS" ("ID", "MSG_TEXT") VALUES ($1, $2)`, [late, wire({ TYPE: 'TEST', SEQN: 53 })]);
    }
    expect(await drainPoller(ctx)).toBe(0);
    expect(await rescanOnce(ctx)).toMatchObject({ enqueued: 1 });
    expect(await rescanOnce(ctx)).toMatchObject({ enqueued: 0 });
    await drainPump(ctx);
    expect(await effects()).toEqual([a, late, c]);
  });

  it('a failing message in a group rolls back alone: earlier ones commit, later ones wait', async () => {
    const ids = [];
    for (let i = 0; i < 5; i++)
      ids.push(await post(wire({ TYPE: 'TEST', SEQN: 60 + i }, i === 2 ? '<TEST><FAIL>INFRA</FAIL></TEST>' : '')));
    await drainPoller(ctx);
    const step = await pumpOnce(ctx);
    expect(step).toMatchObject({ kind: 'processed', count: 3, stopped: true });
    expect((await states()).map((r) => r.status)).toEqual(['SUCCEEDED', 'SUCCEEDED', 'FAILED', 'PENDING', 'PENDING']);
    expect(await effects()).toEqual([ids[0], ids[1]]);
  });

  it('the pump role rests after a step only when that step applied every open row it saw', async () => {
    // Groups of 2; pumpOnce alone applies one group a step, the role's step up to eight.
    ctx = makeContext({ db: pg.db, mailbox, clock, registry: testRegistry(), env: { MSGX_GROUP_COMMIT: '2' } });
    const ids: number[] = [];
    const postAndPoll = async (n: number, body = (_i: number) => '') => {
      for (let i = 0; i < n; i++) ids.push(await post(wire({ TYPE: 'TEST', SEQN: 80 + ids.length }, body(i))));
      await drainPoller(ctx);
    };
    await postAndPoll(3);
    expect(await pumpOnce(ctx)).toMatchObject({ kind: 'processed', count: 2, drained: false });
    expect(await pumpOnce(ctx)).toMatchObject({ kind: 'processed', count: 1, drained: true });
    // Exactly a group's worth: the read may have stopped at its limit, so the pump reads again.
    await postAndPoll(2);
    expect(await pumpOnce(ctx)).toMatchObject({ kind: 'processed', count: 2, drained: false });
    expect(await pumpOnce(ctx)).toEqual({ kind: 'idle' });
    // The role's step goes on to the next group by itself and rests once nothing is left.
    await postAndPoll(5);
    expect(await pumpRole(ctx).step()).toEqual({ busy: false });
    expect(await effects()).toEqual(ids);
    // A failed head holds rows behind it: never drained.
    await postAndPoll(2, (i) => (i === 0 ? '<TEST><FAIL>INFRA</FAIL></TEST>' : ''));
    expect(await pumpOnce(ctx)).toMatchObject({ kind: 'processed', count: 1, stopped: true, drained: false });
    expect(await effects()).toEqual(ids.slice(0, 10));
  });

  it('a transaction that fails at commit is charged to the message that caused it, not to an innocent head', async () => {
    // A deferred constraint fails only at COMMIT, where no savepoint can single a message out:
    // the pump falls back to the head alone, which commits, and the culprit then fails on its own.
    await pg.db.query(
      `CREATE TABLE IF NOT EXISTS test_deferred (id int PRIMARY KEY, ref int REFERENCES test_deferred(id) DEFERRABLE INITIALLY DEFERRED)`,
    );
    const registry = testRegistry().register('BOOM', async ({ tx }) => {
      await tx.query(`INSERT INTO test_deferred (id, ref) VALUES (1, 999)`);
      return { status: 'SUCCEEDED' };
    });
    ctx = makeContext({ db: pg.db, mailbox, clock, registry });
    const ok = await post(wire({ TYPE: 'TEST', SEQN: 70 }));
    const boom = await post(wire({ TYPE: 'BOOM', SEQN: 71 }));
    const after = await post(wire({ TYPE: 'TEST', SEQN: 72 }));
    await drainPoller(ctx);
    expect(await pumpOnce(ctx)).toMatchObject({ kind: 'processed', count: 1 });
    expect(await pumpOnce(ctx)).toMatchObject({ kind: 'processed', count: 0, stopped: true });
    const s = await states();
    expect(s.find((r) => r.msg_id === ok)).toMatchObject({ status: 'SUCCEEDED', attempts: 1 });
    expect(s.find((r) => r.msg_id === boom)).toMatchObject({ status: 'FAILED', error_class: 'INFRA', attempts: 1 });
    expect(s.find((r) => r.msg_id === after)).toMatchObject({ status: 'PENDING', attempts: 0 });
    expect(await effects()).toEqual([ok]);
    expect(await mailbox.filterUnprocessed([ok, boom, after])).toEqual([boom, after]);
    await pg.db.query(`DROP TABLE test_deferred`);
  });

  it('a mailbox read failure holds the head as FAILED(INFRA) without counting an attempt', async () => {
    let down = true;
    const flaky = mailboxWith(mailbox, {
      readTexts: async (ids) => {
        if (down) throw new Error('ECONNREFUSED mailbox');
        return mailbox.readTexts(ids);
      },
    });
    ctx = makeContext({ db: pg.db, mailbox: flaky, clock, registry: testRegistry() });
    const id = await post(wire({ TYPE: 'TEST', SEQN: 75 }));
    await drainPoller(ctx);
    // However long the outage lasts, the head is never exhausted by it.
    for (let i = 0; i < 10; i++) {
      const step = await pumpOnce(ctx);
      expect(step).toMatchObject({ kind: 'waiting', msgId: id });
      clock.advance(60_000);
    }
    const held = await pg.db.query<{ status: string; error_class: string; error_detail: string; attempts: number }>(
      `SELECT status, error_class, error_detail, attempts FROM proc_state WHERE msg_id = $1`,
      [id],
    );
    expect(held.rows[0]).toMatchObject({ status: 'FAILED', error_class: 'INFRA', attempts: 0 });
    expect(held.rows[0]!.error_detail).toMatch(/mailbox read failed: .*ECONNREFUSED/);
    down = false;
    expect((await drainPump(ctx)).kind).toBe('idle');
    expect((await states())[0]).toMatchObject({ status: 'SUCCEEDED', attempts: 1, error_class: null });
  });

  it('a mailbox backfill failure is retried from backfill_todo without re-running the business change', async () => {
    let fail = true;
    const failing = mailboxWith(mailbox, {
      markProcessed: async (marks) => {
        if (fail) throw new Error('mailbox unavailable');
        return mailbox.markProcessed(marks);
      },
    });
    ctx = makeContext({ db: pg.db, mailbox: failing, clock, registry: testRegistry() });
    const id = await post(wire({ TYPE: 'TEST', SEQN: 80 }));
    await drainPoller(ctx);
    await drainPump(ctx);
    expect((await states())[0]!.status).toBe('SUCCEEDED');
    expect(await mailbox.filterUnprocessed([id])).toEqual([id]);
    const todo = await pg.db.query<{ attempts: number; last_error: string }>(`SELECT attempts, last_error FROM backfill_todo`);
    expect(todo.rows[0]).toMatchObject({ attempts: 1, last_error: 'Error: mailbox unavailable' });

    const { backfillSweep } = await import('../../lib/pipeline/backfill.ts');
    fail = false;
    expect(await backfillSweep(ctx)).toBe(0); // not due yet (30 s)
    clock.advance(30_000);
    expect(await backfillSweep(ctx)).toBe(1);
    expect(await mailbox.filterUnprocessed([id])).toEqual([]);
    expect(await effects()).toEqual([id]);
    expect((await pg.db.query(`SELECT 1 FROM backfill_todo`)).rowCount).toBe(0);
  });

  // Not a crash: a back-fill that throws after the commit, then its todo row deleted by the test.
  // Real SIGKILLs of the twin mid-work are in twin-restart.test.ts and the resilience journey.
  it('reconciles a mailbox row left unmarked after its commit when the back-fill failed and no todo row is left', async () => {
    const { reconcileBackfill, backfillSweep } = await import('../../lib/pipeline/backfill.ts');
    const id = await post(wire({ TYPE: 'TEST', SEQN: 90 }));
    await drainPoller(ctx);
    // The commit happened, the back-fill write failed, and the todo row is gone.
    const noBackfill = mailboxWith(mailbox, {
      markProcessed: async () => {
        throw new Error('process killed');
      },
    });
    await drainPump(makeContext({ db: pg.db, mailbox: noBackfill, clock, registry: testRegistry() }));
    await pg.db.query(`DELETE FROM backfill_todo`);
    expect(await mailbox.filterUnprocessed([id])).toEqual([id]);
    expect(await reconcileBackfill(ctx)).toBe(1);
    expect(await backfillSweep(ctx)).toBe(1);
    expect(await mailbox.filterUnprocessed([id])).toEqual([]);
  });

  it('paused means no head processing while messages keep being accepted', async () => {
    await setPaused(pg.db, true, 'test', clock.now());
    await post(wire({ TYPE: 'TEST', SEQN: 100 }));
    expect(await drainPoller(ctx)).toBe(1);
    expect((await pumpOnce(ctx)).kind).toBe('paused');
    await setPaused(pg.db, false, 'test', clock.now());
    expect((await drainPump(ctx)).kind).toBe('idle');
    expect((await states())[0]!.status).toBe('SUCCEEDED');
    // Both switches are audited, with the actor they were given.
    const audit = await pg.db.query(`SELECT actor, action, detail FROM audit_log WHERE action LIKE 'pipeline.%' ORDER BY id`);
    expect(audit.rows).toEqual([
      { actor: 'test', action: 'pipeline.pause', detail: {} },
      { actor: 'test', action: 'pipeline.resume', detail: {} },
    ]);
  });
});
