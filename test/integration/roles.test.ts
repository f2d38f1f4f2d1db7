import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
import { pumpRole } from '../../lib/jobs/roles.ts';
import { runWorker, type WorkerSummary } from '../../lib/jobs/worker.ts';
import { superviseRole } from '../../lib/app/localRoles.ts';
import { type Log, silentLog } from '../../lib/observability/logger.ts';
import { backfillSweep } from '../../lib/pipeline/backfill.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import { drainPoller, makeContext, wire } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, type TestMysql, type TestPg, waitFor } from '../helpers/services.ts';
import { createEffectTables, testRegistry } from '../helpers/testProcessors.ts';

/** Role locks and process death: real PostgreSQL sessions, real child processes, real SIGKILL. */
describe('role locks and killed workers', () => {
  let pg: TestPg;
  let my: TestMysql;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    pg = await freshPg();
    my = await freshMysql();
    await createEffectTables(pg.db);
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await my.drop();
    await pg.drop();
  });

  function child(mode: string, env: Record<string, string> = {}): ChildProcess {
    const c = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/workerChild.ts', mode], {
      env: { ...process.env, TEST_PG_URL: pg.url, TEST_MAILBOX_URL: my.url, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(c);
    return c;
  }
  /** The child's first line of output; fails at once (not at the timeout) if the child dies first. */
  async function firstLine(c: ChildProcess): Promise<string> {
    const exited = once(c, 'exit').then(([code]) => {
      throw new Error(`child exited with ${code} before printing`);
    });
    const [chunk] = (await Promise.race([once(c.stdout!, 'data'), exited])) as [Buffer];
    exited.catch(() => {});
    return chunk.toString().trim();
  }

  it('two pumps at once: the second exits at once, the head is processed once', async () => {
    const ctx = makeContext({
      db: pg.db,
      mailbox: my.mailbox,
      clock: systemClock,
      registry: testRegistry(),
      env: { MSGX_POLL_INTERVAL_MS: '20' },
    });
    const id = await my.mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: 1 }));
    await drainPoller(ctx);
    const [a, b] = await Promise.all([
      runWorker(ctx, { ...pumpRole(ctx), budgetMs: 1500 }),
      runWorker(ctx, { ...pumpRole(ctx), budgetMs: 1500 }),
    ]);
    expect([a.stoppedBy, b.stoppedBy].sort()).toEqual(['budget', 'not-acquired']);
    const n = await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM test_effect WHERE msg_id = $1`, [id]);
    expect(n.rows[0]!.n).toBe(1);
  });

  it('a killed pump process releases the head lock within seconds', async () => {
    const holder = child('hold-lock');
    expect(await firstLine(holder)).toBe('locked');
    expect(await tryRoleLock(pg.db, 'pump')).toBeNull();
    holder.kill('SIGKILL');
    const lock = await waitFor(() => tryRoleLock(pg.db, 'pump'), { timeoutMs: 10_000, what: 'the lock to be free' });
    await lock.release();
  });

  it('a pump killed with SIGKILL mid-run and restarted loses nothing and applies nothing twice', async () => {
    await pg.db.query(`TRUNCATE proc_state, proc_attempt, backfill_todo, msgx_state, mailbox_gap, mailbox_late, test_effect`);
    const total = 400;
    const ids: number[] = [];
    for (let i = 0; i < total; i++) ids.push(await my.mailbox.insertInbound(wire({ TYPE: 'TEST', SEQN: `k${i}` })));
    const done = async () =>
      (await pg.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM proc_state WHERE status = 'SUCCEEDED'`)).rows[0]!.n;

    for (let round = 0; round < 3; round++) {
      const before = await done();
      const worker = child('pump', { TEST_GROUP: '7' });
      expect(await firstLine(worker)).toBe('started');
      await waitFor(async () => (await done()) > before + 30, { timeoutMs: 30_000, what: 'progress' });
      worker.kill('SIGKILL');
      await once(worker, 'exit');
    }
    const last = child('pump');
    await waitFor(async () => (await done()) === total, { timeoutMs: 60_000, what: 'all messages processed' });
    last.kill('SIGKILL');

    const effects = await pg.db.query<{ msg_id: number; n: number }>(
      `SELECT msg_id, count(*)::int AS n FROM test_effect GROUP BY msg_id ORDER BY msg_id`,
    );
    expect(effects.rows.map((r) => r.msg_id)).toEqual(ids);
    expect(effects.rows.every((r) => r.n === 1)).toBe(true);
    // Applied in ID order: the effect timestamps never go backwards along the IDs.
    const order = await pg.db.query<{ msg_id: number }>(`SELECT msg_id FROM test_effect ORDER BY applied_at, msg_id`);
    expect(order.rows.map((r) => r.msg_id)).toEqual(ids);
    // A kill between a commit and its mailbox write leaves the intent in backfill_todo: the sweep
    // role (not run by these children) writes it, as it does in production.
    const sweepCtx = makeContext({ db: pg.db, mailbox: my.mailbox, clock: systemClock });
    await waitFor(
      async () => {
        await backfillSweep(sweepCtx);
        return (await my.mailbox.filterUnprocessed(ids)).length === 0;
      },
      { what: 'backfill of every row' },
    );
    const idle = await pg.db.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`);
    expect(idle.rowCount).toBe(0);
  });

  it('the restart loop (twin, fault child) waits out another holder, survives a failed start, and stops when told', async () => {
    let failStarts = 0;
    // The role's lock session comes from db.session(): make the next start fail as a lost connection would.
    const db = new Proxy(pg.db, {
      get(target, key) {
        if (key === 'session' && failStarts > 0) {
          failStarts--;
          return async () => {
            throw new Error('connection refused');
          };
        }
        const v = Reflect.get(target, key, target) as unknown;
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const errors: string[] = [];
    const ctx = {
      ...makeContext({ db, mailbox: my.mailbox, clock: systemClock, env: { MSGX_POLL_INTERVAL_MS: '20' } }),
      log: { ...silentLog, error: (m: unknown) => void errors.push(String(m)) } as Log,
    };
    let steps = 0;
    const runs: WorkerSummary['stoppedBy'][] = [];
    const holder = await tryRoleLock(pg.db, 'supervised');
    expect(holder).not.toBeNull();
    const stop = new AbortController();
    const loop = superviseRole(ctx, { role: 'supervised', step: async () => (steps++, { busy: false }) }, stop.signal, {
      restartAfterMs: 20,
      onRunEnd: (s) => runs.push(s.stoppedBy),
    });
    try {
      await waitFor(() => runs.filter((r) => r === 'not-acquired').length >= 3, { what: 'retries while the lock is held' });
      expect(steps).toBe(0);
      failStarts = 1;
      await waitFor(() => failStarts === 0, { what: 'a start that fails' });
      await holder!.release();
      await waitFor(() => steps > 0, { what: 'the role running once the holder let go' });
      expect(errors).toEqual(['role failed; restarting']);
    } finally {
      stop.abort();
      await loop;
    }
    expect(runs.at(-1)).toBe('signal');
    // The twin passes no callback: the role runs all the same.
    let bare = 0;
    const stopBare = new AbortController();
    const bareLoop = superviseRole(ctx, { role: 'supervised-bare', step: async () => (bare++, { busy: false }) }, stopBare.signal);
    await waitFor(() => bare > 0, { what: 'a supervised role without a callback running' });
    stopBare.abort();
    await bareLoop;
    // Stopped: the lock was released on the way out.
    const lock = await tryRoleLock(pg.db, 'supervised');
    expect(lock).not.toBeNull();
    await lock!.release();
  });

  it('a worker whose lock session is terminated while it rests stops before its next step, and another takes the role', async () => {
    const ctx = makeContext({ db: pg.db, mailbox: my.mailbox, clock: systemClock, env: { MSGX_POLL_INTERVAL_MS: '400' } });
    let steps = 0;
    let stepped = () => {};
    const run = runWorker(ctx, {
      role: 'terminated',
      step: async () => {
        steps++;
        stepped();
        return { busy: false };
      },
    });
    // Right after a step the worker rests 400 ms: its session is terminated in that rest.
    await new Promise<void>((resolve) => (stepped = resolve));
    const holder = await pg.db.query<{ pid: number }>(
      `SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
       WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()`,
    );
    expect(holder.rowCount).toBe(1);
    await pg.db.query('SELECT pg_terminate_backend($1)', [holder.rows[0]!.pid]);
    const stepsAtKill = steps;
    const summary = await run;
    expect(summary.stoppedBy).toBe('lock-lost');
    expect(steps).toBe(stepsAtKill);
    const next = await tryRoleLock(pg.db, 'terminated');
    expect(next).not.toBeNull();
    await next!.release();
  });
});
