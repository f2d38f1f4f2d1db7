import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { Router } from '../../lib/http/router.ts';
import type { HttpRequest } from '../../lib/http/types.ts';
import { consoleRoutes } from '../../lib/http/consoleRoutes.ts';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { emitGauges, readGauges } from '../../lib/observability/metrics.ts';
import { backfillSweep } from '../../lib/pipeline/backfill.ts';
import { pipelineRoutes } from '../../lib/pipeline/routes.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { drainPoller, drainPump, makeContext } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';
import { createEffectTables, testRegistry } from '../helpers/testProcessors.ts';

/**
 * Observability (README "Operations", docs/console.md "The inbound message trace") through the public interfaces: messages in by HTTP, the trace API,
 * the log lines an operator greps, and the alarm gauges.
 */
type Line = { level: string; line: Record<string, unknown> };
let pg: TestPg;
let mailbox: PgMailbox;
let clock: FakeClock;
let lines: Line[];
let ctx: AppContext & { clock: FakeClock };
const router = new Router([...pipelineRoutes, ...consoleRoutes]);

const capture =
  (level: string) =>
  (msg: unknown, ...extra: unknown[]): void => {
    lines.push({ level, line: typeof msg === 'string' ? { message: msg, ...(extra[0] as object) } : (msg as Record<string, unknown>) });
  };

beforeAll(async () => {
  pg = await freshPg();
  mailbox = new PgMailbox(pg.db);
  await mailbox.ensureTables();
  await createEffectTables(pg.db);
});
afterAll(async () => pg?.drop());
beforeEach(async () => {
  await pg.db.query(`TRUNCATE proc_state, proc_attempt, backfill_todo, test_effect, "CMINMSGS", msgx_state, mailbox_gap, mailbox_late`);
  lines = [];
  clock = new FakeClock('2026-11-29T00:00:00Z');
  const registry = testRegistry().register('SLOW', async () => {
    // Processing that takes 1.5 s of the pipeline's clock.
    clock.advance(1500);
    return { status: 'SUCCEEDED' };
  });
  ctx = {
    ...makeContext({ db: pg.db, mailbox, clock, registry, env: { MSGX_BACKOFF_INITIAL: '2s', MSGX_BACKOFF_MAX: '60s' } }),
    clock,
    log: { debug: capture('debug'), info: capture('info'), warn: capture('warn'), error: capture('error') },
  };
});

let seqn = 1;
const msg = (type: string, body = '') =>
  `<MSG><META><SNDR>T</SNDR><SEQN>${seqn++}</SEQN><TYPE>${type}</TYPE></META><${type}>${body}</${type}></MSG>`;
const req = (method: string, path: string, body = '', headers: Record<string, string> = {}): HttpRequest => ({
  method,
  path,
  headers: { 'content-type': 'application/xml', ...headers },
  query: {},
  body,
  params: {},
  isAdmin: true,
});
const send = async (text: string) => Number((await router.handle(req('POST', '/cminmsgs/send', text), ctx)).body);
const trace = async (id: number) =>
  (await router.handle(req('GET', `/admin/trace/${id}`), ctx)).body as { attempts: { startedAt: string; finishedAt: string }[] };

describe('attempt times', () => {
  it('proc_attempt.started_at is the real start: each attempt spans its own processing', async () => {
    const t0 = clock.now().getTime();
    const a = await send(msg('SLOW'));
    const b = await send(msg('SLOW'));
    await drainPoller(ctx);
    await drainPump(ctx);
    // One group: a from t0 to t0+1.5 s, b from there to t0+3 s.
    expect((await trace(a)).attempts).toEqual([
      expect.objectContaining({ startedAt: new Date(t0).toISOString(), finishedAt: new Date(t0 + 1500).toISOString() }),
    ]);
    expect((await trace(b)).attempts).toEqual([
      expect.objectContaining({ startedAt: new Date(t0 + 1500).toISOString(), finishedAt: new Date(t0 + 3000).toISOString() }),
    ]);
  });
});

describe('logs', () => {
  it('every failed attempt logs its message ID, error class, attempt count and next attempt time', async () => {
    const id = await send(msg('TEST', '<FAIL>INFRA</FAIL>'));
    const t0 = clock.now().getTime();
    await drainPoller(ctx);
    await drainPump(ctx);
    clock.advance(2000);
    await drainPoller(ctx);
    await drainPump(ctx);
    const failed = lines.filter((l) => l.line.message === 'pipeline_attempt_failed').map((l) => ({ level: l.level, ...l.line }));
    // MSGX_BACKOFF_INITIAL=2s, doubling: due 2 s after the first failure, 4 s after the second.
    expect(failed).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg_id: id,
        status: 'FAILED',
        error_class: 'INFRA',
        attempt: 1,
        next_attempt_at: new Date(t0 + 2000).toISOString(),
      }),
      expect.objectContaining({
        level: 'warn',
        msg_id: id,
        status: 'FAILED',
        error_class: 'INFRA',
        attempt: 2,
        next_attempt_at: new Date(t0 + 2000 + 4000).toISOString(),
      }),
    ]);
  });

  it('a message that dies logs its class and that no attempt follows', async () => {
    const id = await send(msg('TEST', '<FAIL>PROTOCOL</FAIL>'));
    await drainPoller(ctx);
    await drainPump(ctx);
    expect(lines.filter((l) => l.line.message === 'pipeline_attempt_failed').map((l) => l.line)).toEqual([
      expect.objectContaining({ msg_id: id, status: 'DEAD', error_class: 'PROTOCOL', attempt: 1, next_attempt_at: null }),
    ]);
  });

  it('the ingress and each pump step log the time of every stage', async () => {
    const id = await send(msg('TEST'));
    await drainPoller(ctx);
    await drainPump(ctx);
    const ingress = lines.find((l) => l.line.message === 'ingress_timing')!;
    expect(ingress.level).toBe('info');
    expect(ingress.line).toMatchObject({ msg_id: id, woken: true });
    for (const k of ['check_ms', 'mailbox_ms', 'wake_ms', 'total_ms']) expect(ingress.line[k]).toBeTypeOf('number');
    const step = lines.find((l) => l.line.message === 'pump_step_timing')!;
    expect(step.level).toBe('info');
    expect(step.line).toMatchObject({ processed: 1, stopped: false, head: id });
    for (const k of ['read_head_ms', 'prepare_ms', 'commit_ms', 'backfill_ms', 'total_ms']) expect(step.line[k]).toBeTypeOf('number');
  });
});

describe('back-fill failure metric', () => {
  it('BackfillFailures counts mailbox back-fills that failed and are still owed, and drops when they succeed', async () => {
    // The mailbox refuses our writes (the owner's maintenance): the back-fill fails after commit.
    await pg.db.query(
      `CREATE FUNCTION refuse_backfill() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'mailbox read-only'; END $$`,
    );
    await pg.db.query(`CREATE TRIGGER refuse_backfill BEFORE UPDATE ON "CMINMSGS" FOR EACH ROW EXECUTE FUNCTION refuse_backfill()`);
    try {
      await send(msg('TEST'));
      await send(msg('TEST'));
      await drainPoller(ctx);
      await drainPump(ctx);
      expect((await readGauges(pg.db, clock.now(), 60_000)).backfillFailures).toBe(2);
      // The failure is logged with the messages, the class, the attempt count and the next attempt.
      const logged = lines.find((l) => l.line.message === 'mailbox backfill failed; the sweep will retry')!;
      const due = new Date(clock.now().getTime() + ctx.config.pipeline.backfillInitialMs).toISOString();
      expect(logged.line).toMatchObject({ error_class: 'INFRA' });
      expect((logged.line.retries as unknown[]).length).toBe(2);
      expect(logged.line.retries).toEqual(expect.arrayContaining([expect.objectContaining({ attempt: 1, next_attempt_at: due })]));

      const out: string[] = [];
      const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => (out.push(String(chunk)), true));
      try {
        emitGauges(await readGauges(pg.db, clock.now(), 60_000));
      } finally {
        spy.mockRestore();
      }
      expect(out.join('')).toContain('"BackfillFailures":2');
    } finally {
      await pg.db.query(`DROP TRIGGER refuse_backfill ON "CMINMSGS"; DROP FUNCTION refuse_backfill()`);
    }
    clock.advance(ctx.config.pipeline.backfillInitialMs);
    expect(await backfillSweep(ctx)).toBe(2);
    expect((await readGauges(pg.db, clock.now(), 60_000)).backfillFailures).toBe(0);
  });
});
