import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgDb } from '../../lib/db/pg.ts';
import { migrate } from '../../lib/db/migrate.ts';
import {
  BUDGET_MARGIN_MS,
  configureLambda,
  lambdaContext,
  LAMBDA_STATEMENT_TIMEOUT_MS,
  RELEASE_RESERVE_MS,
  scheduledHandler,
} from '../../lib/jobs/coldStart.ts';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
import { lambdaSecretReader, secretsManagerReader } from '../../lib/config/secrets.ts';
import { fakeSecretsExtension, fakeSecretsManager, type FakeExtension, type FakeSecretsManager } from '../helpers/fakeAws.ts';
import { startPrivatePg, type PrivatePg } from '../helpers/privatePg.ts';
import { randomTopic } from '../helpers/kafka.ts';
import { freshMysql, serviceUrls, type TestMysql, waitFor } from '../helpers/services.ts';
import { lambdaRole } from '../helpers/lambdaRoles.ts';

const ARN = 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:msgx/pg-Warm01';

/**
 * Scheduled handlers as Lambda runs them, configured as in the cloud: the database URL comes from
 * a secret — read at cold start through a stand-in of the Parameters and Secrets extension (which
 * caches it), re-read after a refused login from a stand-in of Secrets Manager through the real
 * AWS SDK — over verify-full TLS, on a private PostgreSQL that
 * checks passwords. The handler stays warm across invocations, as a Lambda instance does.
 */
describe('scheduled handlers (warm Lambda instance)', () => {
  let srv: PrivatePg;
  let admin: pg.Client;
  let my: TestMysql;
  const user = `msgx_warm_${randomBytes(3).toString('hex')}`;
  let secret = { username: user, password: randomBytes(12).toString('base64url'), port: 0 };
  const store = { values: new Map<string, string>() };
  let ext: FakeExtension;
  let sm: FakeSecretsManager;
  const metrics: { role: string; Heartbeat: number; RoleLockTaken: number }[] = [];
  const saved = { ...process.env };
  let directUrl = '';

  beforeAll(async () => {
    srv = await startPrivatePg();
    admin = new pg.Client({ connectionString: srv.superUrl });
    await admin.connect();
    secret.port = srv.port;
    await admin.query(`CREATE ROLE ${user} LOGIN PASSWORD '${secret.password}'`);
    await admin.query(`CREATE DATABASE msgx OWNER ${user}`);
    directUrl = `postgres://${user}:${secret.password}@127.0.0.1:${srv.port}/msgx?sslmode=verify-full&sslrootcert=${srv.caFile}`;
    const db = new PgDb(directUrl);
    await migrate(db);
    await db.close();
    my = await freshMysql();
    for (const k of Object.keys(process.env)) if (k.startsWith('MSGX_')) delete process.env[k];
    Object.assign(process.env, {
      MSGX_PG_SECRET_ARN: ARN,
      MSGX_PG_HOST: '127.0.0.1',
      MSGX_PG_DB: 'msgx',
      MSGX_PG_SSL_CA: srv.caFile,
      MSGX_MAILBOX_URL: my.url,
      MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
      MSGX_TOPIC_MSG: randomTopic('msgx.msg'),
      MSGX_TOPIC_SCHD: randomTopic('msgx.schd'),
      MSGX_LOG_LEVEL: 'SILENT',
    });
    store.values.set(ARN, JSON.stringify(secret));
    ext = await fakeSecretsExtension(store);
    sm = await fakeSecretsManager(store);
    configureLambda({
      // What lambdaContext() builds from the environment in the cloud, pointed at the stand-ins.
      readSecret: lambdaSecretReader(
        { PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(ext.port), AWS_SESSION_TOKEN: ext.token },
        { sdk: secretsManagerReader(sm.sdkConfig) },
      ),
      roleMetrics: (role, values) => metrics.push({ role, ...values }),
    });
  }, 120_000);
  afterAll(async () => {
    process.env = saved;
    const ctx = await lambdaContext().catch(() => undefined);
    await ctx?.mailbox.close().catch(() => {});
    await ctx?.db.close().catch(() => {});
    await my?.drop();
    await admin?.end().catch(() => {});
    await srv?.stop();
    await ext?.close();
    await sm?.close();
  });

  it('stops a step before the statement timeout can outlive the invocation', () => {
    // The margin left when the loop stops covers the longest statement the step may be running,
    // with time to spare for releasing the lock and returning.
    expect(BUDGET_MARGIN_MS - RELEASE_RESERVE_MS).toBeGreaterThan(LAMBDA_STATEMENT_TIMEOUT_MS);
    expect(RELEASE_RESERVE_MS).toBeGreaterThan(0);
  });

  it('the next invocation of a warm pump succeeds after the password and the secret rotate', async () => {
    const pump = await lambdaRole('pump');
    // A few seconds of loop: enough for the reconnect below on a loaded machine.
    const first = await pump({}, { getRemainingTimeInMillis: () => BUDGET_MARGIN_MS + 2_000 });
    expect(first).toMatchObject({ role: 'pump', acquired: true, errors: 0 });
    // The cold start read the secret once, through the extension; Secrets Manager was not asked.
    expect([ext.fetches, sm.calls]).toEqual([[ARN], []]);
    const extensionRequests = ext.requests.length;

    const next = randomBytes(12).toString('base64url');
    await admin.query(`ALTER ROLE ${user} PASSWORD '${next}'`);
    secret = { ...secret, password: next };
    store.values.set(ARN, JSON.stringify(secret));
    // The instance's connections end (idle timeouts, a freeze): the next ones must log in again.
    await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [user]);
    const ctx = await lambdaContext();
    await waitFor(() => (ctx.db as PgDb).pool.idleCount === 0, { what: 'terminated clients dropped' });

    const second = await pump({}, { getRemainingTimeInMillis: () => BUDGET_MARGIN_MS + 3_000 });
    expect(second).toMatchObject({ role: 'pump', acquired: true, errors: 0 });
    expect(second.steps).toBeGreaterThan(0);
    // One re-read, from Secrets Manager: the extension would still serve the old password (TTL).
    expect(sm.calls).toEqual([ARN]);
    expect(ext.requests.length).toBe(extensionRequests);
    expect(metrics.filter((m) => m.role === 'pump')).toEqual([
      { role: 'pump', Heartbeat: 1, RoleLockTaken: 0 },
      { role: 'pump', Heartbeat: 1, RoleLockTaken: 0 },
    ]);
  });

  it('a step that outlasts the remaining time ends the run cleanly; the lock is free for the next one', async () => {
    const seen: number[] = [];
    let slow = true;
    const handler = scheduledHandler((ctx) => ({
      role: 'overrun',
      async step(budget) {
        seen.push(budget?.remainingMs ?? Number.NaN);
        // Statements of 4 s one after another (each below the statement timeout), for longer than
        // the 300 ms left plus what the margin allows: Lambda would kill this mid-step.
        const until = Date.now() + 2 * BUDGET_MARGIN_MS;
        while (slow && Date.now() < until) await ctx.db.query('SELECT pg_sleep(4)');
        return { busy: false };
      },
    }));
    const run = await handler({}, { getRemainingTimeInMillis: () => BUDGET_MARGIN_MS + 300 });
    expect(run).toMatchObject({ role: 'overrun', acquired: true, steps: 1, stoppedBy: 'step-overran' });
    expect(seen[0]).toBeGreaterThan(0);
    expect(seen[0]).toBeLessThanOrEqual(300);
    slow = false;

    // Released in `finally` before the handler returned: another session gets it at once.
    const probe = new PgDb(directUrl.replace(/:[^:@]+@/, `:${secret.password}@`));
    try {
      const lock = await tryRoleLock(probe, 'overrun');
      expect(lock).not.toBeNull();
      await lock!.release();
    } finally {
      await probe.close();
    }

    // Two seconds of budget: on a loaded machine a connection and the lock alone can take 200 ms.
    const again = await handler({}, { getRemainingTimeInMillis: () => BUDGET_MARGIN_MS + 2_000 });
    expect(again).toMatchObject({ role: 'overrun', acquired: true, errors: 0, stoppedBy: 'budget' });
    expect(again.steps).toBeGreaterThan(0);
  });

  it('reports the lock taken when another worker holds it (the LockTaken alarm counts these)', async () => {
    const handler = scheduledHandler(() => ({ role: 'held', step: async () => ({ busy: false }) }));
    const ctx = await lambdaContext();
    const lock = await tryRoleLock(ctx.db, 'held');
    try {
      const run = await handler({}, { getRemainingTimeInMillis: () => BUDGET_MARGIN_MS + 200 });
      expect(run).toMatchObject({ acquired: false, stoppedBy: 'not-acquired' });
    } finally {
      await lock!.release();
    }
    expect(metrics.filter((m) => m.role === 'held')).toEqual([{ role: 'held', Heartbeat: 0, RoleLockTaken: 1 }]);
  });
});
