import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUDGET_MARGIN_MS, configureLambda } from '../../lib/jobs/coldStart.ts';
import type { RoleRunValues } from '../../lib/app/role.ts';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
import { kickIfIdle } from '../../lib/jobs/kick.ts';
import { isPaused, setPaused } from '../../lib/pipeline/pause.ts';
import { wire } from '../helpers/pipeline.ts';
import { apiGatewayEvent as event, apiGatewayEventV2 } from '../helpers/apiGatewayEvent.ts';
import { asLambdaFunction, type LambdaFunction } from '../helpers/lambdaEnv.ts';
import type { TestPg } from '../helpers/services.ts';
import { lambdaRole } from '../helpers/lambdaRoles.ts';

/**
 * The Lambda entry points as Lambda calls them: an API Gateway event into functions/ingress.ts,
 * a scheduled invocation of the pump's handler (test/helpers/lambdaRoles.ts) with a remaining-time budget, against real
 * PostgreSQL, MariaDB and Kafka, with the cloud's configuration rules in force.
 */
describe('Lambda handlers', () => {
  let fn: LambdaFunction;
  let pg: TestPg;

  const OPERATOR = 'arn:aws:iam::123456789012:role/ops/msgx-operator';
  beforeAll(async () => {
    fn = await asLambdaFunction({ MSGX_OPERATOR_PRINCIPALS: OPERATOR });
    pg = fn.pg;
  });
  afterAll(() => fn?.end());

  it('ingress stores a message from an API Gateway event; the scheduled poller and pump process it within their budgets', async () => {
    const { handler: ingress } = await import('../../functions/ingress.ts');
    const pump = await lambdaRole('pump');
    const poller = await lambdaRole('poller');
    const res = await ingress(event('POST', '/cminmsgs/send', wire({ TYPE: 'LDM', SEQN: 'lambda-1' })));
    expect(res.statusCode).toBe(200);
    expect(res.headers?.['content-type']).toMatch(/^text\/plain/);
    const id = Number(res.body);
    // The row reaches the pump through the poller (docs/ordering.md); about 0.5 s of its loop.
    expect(await poller({}, { getRemainingTimeInMillis: () => BUDGET_MARGIN_MS + 500 })).toMatchObject({ role: 'poller', acquired: true });

    // The stop margin plus 1.5 s left in the invocation: the loop works for about 1.5 s.
    const summary = await pump({}, { getRemainingTimeInMillis: () => BUDGET_MARGIN_MS + 1_500 });
    expect(summary).toMatchObject({ role: 'pump', acquired: true, stoppedBy: 'budget' });
    const row = await pg.db.query(`SELECT status, note FROM proc_state WHERE msg_id = $1`, [id]);
    expect(row.rows[0]).toEqual({ status: 'SKIPPED', note: 'ignored-type:LDM' });
  });

  it('the deploy-time migrate function finds the schema current and creates the topics once', async () => {
    const { handler: migrateFn } = await import('../../functions/migrate.ts');
    const first = await migrateFn();
    expect(first.applied).toEqual([]);
    // With exactly once (the default with brokers) the targets' cursors get their compacted topic too.
    expect(first.topicsCreated.sort()).toEqual(
      [process.env.MSGX_TOPIC_MSG, process.env.MSGX_TOPIC_SCHD, process.env.MSGX_TOPIC_OFFSETS].sort(),
    );
    const again = await migrateFn();
    expect(again.topicsCreated).toEqual([]);
  });

  it('a second pump invocation while one holds the lock exits at once', async () => {
    const pump = await lambdaRole('pump');
    const lock = await tryRoleLock(pg.db, 'pump');
    try {
      const summary = await pump({}, { getRemainingTimeInMillis: () => 60_000 });
      expect(summary).toMatchObject({ acquired: false, stoppedBy: 'not-acquired', steps: 0 });
    } finally {
      await lock!.release();
    }
  });

  it('health checks the database, migrations, mailbox and Kafka', async () => {
    const { handler: ingress } = await import('../../functions/ingress.ts');
    const res = await ingress(event('GET', '/health', ''));
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body)).toEqual({
      status: 'ok',
      checks: { database: 'ok', migrations: 'ok', mailbox: 'ok', kafka: 'ok', 'kafka-topics': 'ok' },
      pipeline: 'running',
    });
  });

  it('admin routes answer only to a listed operator role (payload 1.0 and 2.0); an upstream caller is refused saying why', async () => {
    const { handler: ingress } = await import('../../functions/ingress.ts');
    expect((await ingress(event('GET', '/admin/stats', ''))).statusCode).toBe(403);
    const ok = await ingress(event('GET', '/admin/stats', '', OPERATOR));
    expect(ok.statusCode).toBe(200);
    expect(JSON.parse(ok.body)).toMatchObject({ pipeline: { backlog: 0 } });

    // An upstream system's role may invoke the API (it sends messages) but is no operator.
    const upstream = 'arn:aws:sts::123456789012:assumed-role/msgx-upstream/orders-service';
    const sent = await ingress(
      apiGatewayEventV2('POST', '/cminmsgs/send', {
        body: wire({ TYPE: 'LDM', SEQN: 'v2-1' }),
        callerArn: upstream,
        headers: { 'content-type': 'application/xml' },
      }),
    );
    expect(sent.statusCode).toBe(200);
    for (const [method, path] of [
      ['POST', '/admin/pause'],
      ['POST', '/admin/replay'],
      ['GET', '/admin/dead'],
      ['GET', '/admin/stats'],
    ] as const) {
      const refused = await ingress(
        apiGatewayEventV2(method, path, { callerArn: upstream, body: method === 'POST' ? '{"kind":"proc","ids":[1]}' : undefined }),
      );
      expect(refused.statusCode, `${method} ${path}`).toBe(403);
      expect(JSON.parse(refused.body)).toEqual({
        error: 'forbidden',
        detail: `admin route: ${upstream} is not an operator (its role is not in MSGX_OPERATOR_PRINCIPALS)`,
      });
    }
    const auditRows = async () =>
      (await pg.db.query<{ actor: string; action: string }>(`SELECT actor, action FROM audit_log ORDER BY id`)).rows;
    expect(await auditRows()).toEqual([]); // refused: nothing done, nothing audited
    expect(await isPaused(pg.db)).toBe(false);

    // The operator, signed in through IAM Identity Center: its role is listed (with its path).
    const operatorSession = 'arn:aws:sts::123456789012:assumed-role/msgx-operator/alice@example.com';
    const paused = await ingress(
      apiGatewayEventV2('POST', '/admin/pause', { callerArn: operatorSession, headers: { 'x-msgx-actor': 'mallory' } }),
    );
    expect([paused.statusCode, JSON.parse(paused.body)]).toEqual([200, { paused: true, changed: true }]);
    const resumed = await ingress(apiGatewayEventV2('POST', '/admin/resume', { callerArn: operatorSession }));
    expect(resumed.statusCode).toBe(200);
    expect(await auditRows()).toEqual([
      { actor: `${OPERATOR} (session alice@example.com)`, action: 'pipeline.pause' },
      { actor: `${OPERATOR} (session alice@example.com)`, action: 'pipeline.resume' },
    ]);
  });

  it('the ingress starts a pump only when none is live and the pipeline is not paused', async () => {
    let invoked = 0;
    const invoke = async () => void invoked++;
    expect(await kickIfIdle(pg.db, invoke)).toBe(true);
    const lock = await tryRoleLock(pg.db, 'pump');
    expect(await kickIfIdle(pg.db, invoke)).toBe(false);
    await lock!.release();
    await setPaused(pg.db, true, 'test', new Date());
    expect(await kickIfIdle(pg.db, invoke)).toBe(false);
    await setPaused(pg.db, false, 'test', new Date());
    expect(invoked).toBe(1);
  });

  it('paused, the pump reports Paused and no heartbeat while the poller goes on; resumed, the message is processed and the pump beats again', async () => {
    const runs: (RoleRunValues & { role: string })[] = [];
    configureLambda({ roleMetrics: (role, values) => runs.push({ role, ...values }) });
    const { handler: ingress } = await import('../../functions/ingress.ts');
    const pump = await lambdaRole('pump');
    const poller = await lambdaRole('poller');
    const statusOf = async (id: number) => (await pg.db.query(`SELECT status FROM proc_state WHERE msg_id = $1`, [id])).rows[0]?.status;
    await setPaused(pg.db, true, 'test', new Date());
    const res = await ingress(event('POST', '/cminmsgs/send', wire({ TYPE: 'LDM', SEQN: 'paused-1' })));
    expect(res.statusCode).toBe(200); // the ingress keeps accepting
    const id = Number(res.body);
    const budget = { getRemainingTimeInMillis: () => BUDGET_MARGIN_MS + 500 };
    expect(await poller({}, budget)).toMatchObject({ acquired: true });
    // Every step of the run finds the pipeline paused (a loaded host may fit one or two in the budget).
    const paused = (await pump({}, budget)) as { acquired: boolean; errors: number; steps: number; pausedSteps: number };
    expect(paused).toMatchObject({ acquired: true, errors: 0 });
    expect(paused.pausedSteps).toBeGreaterThan(0);
    expect(paused.pausedSteps).toBe(paused.steps);
    expect(await statusOf(id)).toBe('PENDING');
    expect(runs).toEqual([
      { role: 'poller', Heartbeat: 1, RoleLockTaken: 0 },
      { role: 'pump', Heartbeat: 0, RoleLockTaken: 0, Paused: 1 },
    ]);

    await setPaused(pg.db, false, 'test', new Date());
    expect(await pump({}, budget)).toMatchObject({ acquired: true, errors: 0 });
    expect(await statusOf(id)).toBe('SKIPPED');
    expect(runs.at(-1)).toEqual({ role: 'pump', Heartbeat: 1, RoleLockTaken: 0 });
  });
});
