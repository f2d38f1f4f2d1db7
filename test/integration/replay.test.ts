import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { archiveProcState } from '../../lib/pipeline/procArchive.ts';
import { replayMessages } from '../../lib/pipeline/replay.ts';
import { Router } from '../../lib/http/router.ts';
import { adminRoutes } from '../../lib/http/adminRoutes.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { InfraError } from '../../lib/shared/errors.ts';
import { drainPoller, drainPump, makeContext, wire } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';
import { createEffectTables, testRegistry } from '../helpers/testProcessors.ts';

/** Replay (README "Operations", docs/console.md "Pages"): replayable classes only, by class or IDs, dry run, audit, order warning. */
describe('replay of dead and failed messages', () => {
  let pg: TestPg;
  const clock = new FakeClock();
  let ids: Record<string, number>;

  beforeAll(async () => {
    pg = await freshPg();
    await createEffectTables(pg.db);
    const mailbox = new PgMailbox(pg.db);
    await mailbox.ensureTables();
    const ctx = makeContext({ db: pg.db, mailbox, clock, registry: testRegistry(), env: { MSGX_MAX_ATTEMPTS: '1' } });
    ids = {
      exhausted: await mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: 1 }, '<TEST><FAIL>INFRA</FAIL></TEST>')),
      protocol: await mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: 2 }, '<TEST><FAIL>PROTOCOL</FAIL></TEST>')),
      malformed: await mailbox.insertInbound('<MSG>'),
      ok: await mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: 3 })),
    };
    await drainPoller(ctx);
    await drainPump(ctx);
  });
  afterAll(() => pg.drop());

  const status = async (id: number) =>
    (
      await pg.db.query<{ status: string; error_class: string | null; attempts: number; identity_key: string | null }>(
        `SELECT status, error_class, attempts, identity_key FROM proc_state WHERE msg_id = $1`,
        [id],
      )
    ).rows[0]!;

  it('a dry run lists what would move, refuses non-replayable classes with a reason, and warns about order', async () => {
    const r = await replayMessages(
      pg.db,
      { ids: [ids.exhausted!, ids.protocol!, ids.malformed!, ids.ok!, 999999], dryRun: true },
      'tester',
      clock.now(),
    );
    expect(r.moved).toEqual([{ msgId: ids.exhausted, status: 'DEAD', errorClass: 'EXHAUSTED' }]);
    expect(r.refused).toEqual([
      { msgId: ids.protocol, reason: 'PROTOCOL is not replayable (fix the message instead)' },
      { msgId: ids.malformed, reason: 'MALFORMED is not replayable (fix the message instead)' },
      { msgId: ids.ok, reason: 'status is SUCCEEDED' },
      { msgId: 999999, reason: 'no such message' },
    ]);
    expect(r.warnings[0]).toMatch(/1 newer message\(s\) already succeeded/);
    expect((await status(ids.exhausted!)).status).toBe('DEAD');
  });

  it('replays by class: back to PENDING with attempts reset, audited, then processed again', async () => {
    const before = await status(ids.exhausted!);
    const r = await replayMessages(pg.db, { errorClass: 'EXHAUSTED', dryRun: false }, 'tester', clock.now());
    expect(r.moved.map((m) => m.msgId)).toEqual([ids.exhausted]);
    const after = await status(ids.exhausted!);
    expect(after).toMatchObject({ status: 'PENDING', attempts: 0, error_class: null, identity_key: before.identity_key });
    const audit = await pg.db.query<{ actor: string; action: string; detail: { moved: number[] } }>(
      `SELECT actor, action, detail FROM audit_log WHERE action = 'replay.proc'`,
    );
    expect(audit.rows).toEqual([{ actor: 'tester', action: 'replay.proc', detail: expect.objectContaining({ moved: [ids.exhausted] }) }]);
    // The attempt history of the first life is kept; the new attempt is appended.
    const ctx = makeContext({ db: pg.db, mailbox: new PgMailbox(pg.db), clock, registry: testRegistry(), env: { MSGX_MAX_ATTEMPTS: '1' } });
    await drainPump(ctx);
    const attempts = await pg.db.query(`SELECT attempt FROM proc_attempt WHERE msg_id = $1 ORDER BY id`, [ids.exhausted]);
    expect(attempts.rows).toEqual([{ attempt: 1 }, { attempt: 1 }]);
  });

  it('a dead message holds no identity: a corrected copy is processed; the replayed original is then a duplicate; a replay that succeeds rewrites its mailbox row', async () => {
    let down = true;
    const registry = testRegistry().register('FLAKY', async () => {
      if (down) throw new InfraError('the downstream is down');
      return { status: 'SUCCEEDED' };
    });
    const mailbox = new PgMailbox(pg.db);
    const ctx = makeContext({ db: pg.db, mailbox, clock, registry, env: { MSGX_MAX_ATTEMPTS: '1' } });
    const mailboxRow = async (id: number) =>
      (
        await pg.db.query<{ PROC_STATUS: string; PROC_NOTE: string | null }>(
          `SELECT "PROC_STATUS", "PROC_NOTE" FROM "CMINMSGS" WHERE "ID" = $1`,
          [id],
        )
      ).rows[0]!;
    const flaky = await mailbox.insertInbound(wire({ TYPE: 'FLAKY', SEQN: 20 }));
    const dies = await mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: 21 }, '<TEST><FAIL>PROTOCOL</FAIL></TEST>'));
    const corrected = await mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: 21 }));
    const exhausted = await mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: 22 }, '<TEST><FAIL>INFRA</FAIL></TEST>'));
    const retaken = await mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: 22 }));
    await drainPoller(ctx);
    await drainPump(ctx);
    expect(await status(flaky)).toMatchObject({ status: 'DEAD', error_class: 'EXHAUSTED' });
    expect(await status(dies)).toMatchObject({ status: 'DEAD', error_class: 'PROTOCOL', identity_key: null });
    expect(await status(corrected)).toMatchObject({ status: 'SUCCEEDED', identity_key: 'FIMS|TEST||21' });
    expect(await status(retaken)).toMatchObject({ status: 'SUCCEEDED', identity_key: 'FIMS|TEST||22' });
    expect(await mailboxRow(flaky)).toMatchObject({ PROC_STATUS: 'DEAD' });

    down = false;
    await replayMessages(pg.db, { ids: [flaky, exhausted], dryRun: false }, 'tester', clock.now());
    await drainPump(ctx);
    expect(await status(flaky)).toMatchObject({ status: 'SUCCEEDED' });
    expect(await mailboxRow(flaky)).toEqual({ PROC_STATUS: 'SUCCEEDED', PROC_NOTE: null });
    const skipped = await pg.db.query<{ status: string; note: string }>(`SELECT status, note FROM proc_state WHERE msg_id = $1`, [
      exhausted,
    ]);
    expect(skipped.rows[0]).toEqual({ status: 'SKIPPED', note: `duplicate-of:${retaken}` });
    expect((await mailboxRow(exhausted)).PROC_STATUS).toBe('SKIPPED');
  });
  // Seen red: replay read proc_state only, so an archived dead letter was 'no such message'.
  it('a DEAD message already archived to proc_state_hst is listed and replayed: back in proc_state, processed again', async () => {
    let down = true;
    const registry = testRegistry().register('LATE', async () => {
      if (down) throw new InfraError('the downstream is down');
      return { status: 'SUCCEEDED' };
    });
    const mailbox = new PgMailbox(pg.db);
    const ctx = makeContext({ db: pg.db, mailbox, clock, registry, env: { MSGX_MAX_ATTEMPTS: '1' } });
    const old = await mailbox.insertInbound(wire({ TYPE: 'LATE', SEQN: 30 }));
    const oldProtocol = await mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: 31 }, '<TEST><FAIL>PROTOCOL</FAIL></TEST>'));
    await drainPoller(ctx);
    await drainPump(ctx);
    clock.advance(31 * 86_400_000);
    expect(await archiveProcState(pg.db, { now: clock.now(), retentionDays: 30 })).toBeGreaterThanOrEqual(2);
    const inHst = async (id: number) => (await pg.db.query(`SELECT 1 FROM proc_state_hst WHERE msg_id = $1`, [id])).rowCount;
    expect(await inHst(old)).toBe(1);

    const router = new Router(adminRoutes);
    const get = (query: Record<string, string>) =>
      router.handle({ method: 'GET', path: '/admin/dead', headers: {}, query, body: '', params: {}, isAdmin: true }, ctx);
    const dead = (await get({ kind: 'proc', errorClass: 'EXHAUSTED' })).body as { items: { msg_id: number; archived: boolean }[] };
    expect(dead.items.find((d) => d.msg_id === old)).toMatchObject({ archived: true });

    const dry = await replayMessages(pg.db, { ids: [old, oldProtocol], dryRun: true }, 'tester', clock.now());
    expect(dry.moved).toEqual([{ msgId: old, status: 'DEAD', errorClass: 'EXHAUSTED', archived: true }]);
    expect(dry.refused).toEqual([{ msgId: oldProtocol, reason: 'PROTOCOL is not replayable (fix the message instead)' }]);
    expect(await inHst(old)).toBe(1); // a dry run moves nothing

    down = false;
    await replayMessages(pg.db, { ids: [old], dryRun: false }, 'tester', clock.now());
    expect(await inHst(old)).toBe(0);
    expect(await status(old)).toMatchObject({ status: 'PENDING', attempts: 0, error_class: null });
    await drainPump(ctx);
    expect(await status(old)).toMatchObject({ status: 'SUCCEEDED', attempts: 1 });
    const mailed = await pg.db.query<{ PROC_STATUS: string }>(`SELECT "PROC_STATUS" FROM "CMINMSGS" WHERE "ID" = $1`, [old]);
    expect(mailed.rows[0]!.PROC_STATUS).toBe('SUCCEEDED');
    // The poller never enqueues an archived ID again, and it is no longer archived: nothing doubles.
    await drainPoller(ctx);
    expect((await pg.db.query(`SELECT 1 FROM proc_state WHERE msg_id = $1`, [old])).rowCount).toBe(1);
  });
});
