import { beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../lib/shared/clock.ts';
import { GROUPS_PER_STEP, pumpOnce } from '../../lib/pipeline/pump.ts';
import { drainPoller, drainPump, makeContext, wire } from '../helpers/pipeline.ts';
import { useFreshDatabases } from '../helpers/freshDatabases.ts';
import { createEffectTables, testRegistry } from '../helpers/testProcessors.ts';

/**
 * Issue 2 "done when": 1,000 mailbox rows with duplicates, malformed XML and ignored types end
 * terminal in ID order with the right status and class, every terminal row back-filled.
 */
describe('1,000 mixed mailbox rows', () => {
  const dbs = useFreshDatabases();
  beforeAll(() => createEffectTables(dbs.pg.db));

  const IGNORED = ['LDM', 'REGN', 'RSTA', 'EROR'];

  it('ends every row terminal, in ID order, with the expected status and class, back-filled', async () => {
    type Expect = { status: string; cls: string | null };
    const expected = new Map<number, Expect>();
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const kind = i % 10;
      let xml: string;
      let exp: Expect;
      if (kind === 3) {
        xml = `<MSG><META><SNDR>FIMS</SNDR><TYPE>TEST</TYPE><SEQN>${i}`; // truncated
        exp = { status: 'DEAD', cls: 'MALFORMED' };
      } else if (kind === 5) {
        // i = 5, 15, 25, …: (i - 5) / 10 walks all four ignored types in turn.
        xml = wire({ TYPE: IGNORED[((i - 5) / 10) % 4]!, SEQN: i });
        exp = { status: 'SKIPPED', cls: null };
      } else if (kind === 7) {
        xml = `<MSG><META><SNDR>FIMS</SNDR><TYPE>TEST</TYPE></META></MSG>`;
        exp = { status: 'DEAD', cls: 'MALFORMED' };
      } else {
        // Every 4th valid message repeats an earlier sequence number: a duplicate identity.
        const seqn = kind === 9 ? String(i - 1) : String(i);
        xml = wire({ TYPE: 'TEST', SEQN: seqn });
        exp = seen.has(seqn) ? { status: 'SKIPPED', cls: null } : { status: 'SUCCEEDED', cls: null };
        seen.add(seqn);
      }
      expected.set(await dbs.my.mailbox.insertInbound(xml), exp);
    }
    const ctx = makeContext({ db: dbs.pg.db, mailbox: dbs.my.mailbox, clock: new FakeClock(), registry: testRegistry() });
    // Interleave polling and pumping, as the roles do.
    for (let i = 0; i < 100; i++) {
      const n = await drainPoller(ctx);
      await drainPump(ctx);
      if (n === 0) break;
    }
    const rows = await dbs.pg.db.query<{ msg_id: number; status: string; error_class: string | null }>(
      `SELECT msg_id, status, error_class FROM proc_state ORDER BY msg_id`,
    );
    expect(rows.rowCount).toBe(1000);
    for (const r of rows.rows)
      expect({ id: r.msg_id, status: r.status, cls: r.error_class }).toEqual({ id: r.msg_id, ...expected.get(r.msg_id) });
    const effects = await dbs.pg.db.query<{ msg_id: number }>(`SELECT msg_id FROM test_effect ORDER BY ctid`);
    const succeeded = rows.rows.filter((r) => r.status === 'SUCCEEDED').map((r) => r.msg_id);
    expect(effects.rows.map((r) => r.msg_id)).toEqual(succeeded);
    // Processed in ID order: attempt records were written in ascending message order.
    const order = await dbs.pg.db.query<{ msg_id: number }>(`SELECT msg_id FROM proc_attempt ORDER BY id`);
    expect(order.rows.map((r) => r.msg_id)).toEqual([...expected.keys()]);
    const unprocessed = await dbs.my.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM CMINMSGS WHERE DATE_PROCESSED IS NULL');
    expect(unprocessed[0]!.n).toBe(0);
    const statuses = await dbs.my.query<{ PROC_STATUS: string; n: number }[]>(
      'SELECT PROC_STATUS, COUNT(*) AS n FROM CMINMSGS GROUP BY PROC_STATUS ORDER BY PROC_STATUS',
    );
    const want = [...expected.values()].reduce<Record<string, number>>((a, e) => ((a[e.status] = (a[e.status] ?? 0) + 1), a), {});
    expect(Object.fromEntries(statuses.map((s) => [s.PROC_STATUS, s.n]))).toEqual(want);
    // Each of the four ignored types was written and SKIPPED.
    const typesSkipped = await dbs.my.query<{ t: string; n: number }[]>(
      `SELECT SUBSTRING_INDEX(SUBSTRING_INDEX(MSG_TEXT, '<TYPE>', -1), '</TYPE>', 1) AS t, COUNT(*) AS n
       FROM CMINMSGS WHERE PROC_STATUS = 'SKIPPED' GROUP BY t ORDER BY t`,
    );
    for (const t of IGNORED) expect(typesSkipped.find((r) => r.t === t)?.n, t).toBe(25);
  });

  it("in the pump role's steps (groups read ahead, back-fills overlapping): the same order, every step returns back-filled, a failed read ahead costs nothing", async () => {
    await dbs.pg.db.query(`TRUNCATE proc_state, proc_state_hst, proc_attempt, backfill_todo, test_effect`);
    await dbs.my.query('DELETE FROM CMINMSGS');
    const ids: number[] = [];
    // 400 valid messages, every 7th one a duplicate of the one before, every 13th malformed.
    const expected = new Map<number, string>();
    for (let i = 0; i < 400; i++) {
      const xml = i % 13 === 12 ? `<MSG><META><SNDR>FIMS</SNDR>` : wire({ TYPE: 'TEST', SEQN: i % 7 === 6 ? `b${i - 1}` : `b${i}` });
      const id = await dbs.my.mailbox.insertInbound(xml);
      ids.push(id);
      expected.set(id, i % 13 === 12 ? 'DEAD' : i % 7 === 6 && (i - 1) % 13 !== 12 ? 'SKIPPED' : 'SUCCEEDED');
    }
    // Every third mailbox read fails: some are reads ahead (read again in their own step), some
    // are a group's own (its head waits as FAILED(INFRA), no attempt counted).
    let reads = 0;
    const real = dbs.my.mailbox;
    const flaky = new Proxy(real, {
      get: (target, key) => {
        if (key === 'readTexts')
          return (batch: number[]) => (++reads % 3 === 0 ? Promise.reject(new Error('mailbox read reset')) : target.readTexts(batch));
        const v: unknown = Reflect.get(target, key, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const clock = new FakeClock();
    const ctx = makeContext({ db: dbs.pg.db, mailbox: flaky, clock, registry: testRegistry() });
    await drainPoller(ctx);
    let steps = 0;
    for (;;) {
      const step = await pumpOnce(ctx, { maxGroups: GROUPS_PER_STEP });
      steps++;
      // Whatever the step made terminal is back-filled when it returns.
      const todo = await dbs.pg.db.query(`SELECT msg_id FROM backfill_todo`);
      expect(todo.rows).toEqual([]);
      if (step.kind === 'waiting') clock.advance(step.untilMs - clock.now().getTime());
      else if (step.kind !== 'processed') break;
    }
    expect(steps).toBeGreaterThan(400 / 50 / GROUPS_PER_STEP);
    const rows = await dbs.pg.db.query<{ msg_id: number; status: string; attempts: number }>(
      `SELECT msg_id, status, attempts FROM proc_state ORDER BY msg_id`,
    );
    expect(rows.rows.map((r) => [r.msg_id, r.status])).toEqual(ids.map((id) => [id, expected.get(id)]));
    // A failed read never spent an attempt: every message took exactly one.
    expect(rows.rows.filter((r) => r.attempts !== 1)).toEqual([]);
    const order = await dbs.pg.db.query<{ msg_id: number }>(
      `SELECT msg_id FROM proc_attempt WHERE error_class IS DISTINCT FROM 'INFRA' ORDER BY id`,
    );
    expect(order.rows.map((r) => r.msg_id)).toEqual(ids);
    const unprocessed = await dbs.my.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM CMINMSGS WHERE DATE_PROCESSED IS NULL');
    expect(unprocessed[0]!.n).toBe(0);
  });
});
