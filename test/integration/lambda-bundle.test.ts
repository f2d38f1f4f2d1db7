import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../infra-cdk/build.ts';
import { bundleFunction } from '../../infra-cdk/bundle.ts';
import { BUDGET_MARGIN_MS } from '../../lib/jobs/coldStart.ts';
import { functionServices, type FunctionServices } from '../helpers/lambdaEnv.ts';
import { wire } from '../helpers/pipeline.ts';
import type { TestMysql, TestPg } from '../helpers/services.ts';

const run = promisify(execFile);

/**
 * The Lambda bundles as deployed (infra-cdk/bundle.ts: chunks, and the shims that replace what
 * only the twin needs) run against the real PostgreSQL, MariaDB and Kafka: the ingress stores a
 * message in the MySQL mailbox, the poller reads it from there. The sources run in every other
 * test; only this one runs the bundled code, where a shim (iconv-lite's, for mysql2) could fail.
 */
describe('the Lambda bundles against the real services', () => {
  let services: FunctionServices;
  let pg: TestPg;
  let my: TestMysql;
  let out: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    out = mkdtempSync(join(REPO_ROOT, 'bench', '.out-test-'));
    // The ingress from functions/ingress.ts; the poller from the entry written from its catalogue entry.
    for (const fn of ['ingress', 'poller', 'dispatcher'] as const)
      await bundleFunction({ repoRoot: REPO_ROOT, fn, outdir: join(out, fn), target: 'node22', sourcemap: false });
    writeFileSync(
      join(out, 'invoke.mjs'),
      `const [file, event] = process.argv.slice(2);
const { handler } = await import(file);
const r = event === 'scheduled' ? await handler({}, { getRemainingTimeInMillis: () => ${BUDGET_MARGIN_MS} + 500 }) : await handler(JSON.parse(event));
process.stdout.write('\\n' + JSON.stringify(r));
process.exit(0);`,
    );
    services = await functionServices();
    ({ pg, my } = services);
    env = { PATH: process.env.PATH ?? '', ...services.env };
  }, 300_000);
  afterAll(async () => {
    await services?.drop();
    if (out) rmSync(out, { recursive: true, force: true });
  });

  const invoke = async (fn: string, event: unknown, only?: (k: string) => boolean) => {
    const { stdout } = await run(
      process.execPath,
      [join(out, 'invoke.mjs'), join(out, fn, 'index.mjs'), typeof event === 'string' ? event : JSON.stringify(event)],
      {
        cwd: out,
        env: Object.fromEntries(Object.entries(env).filter(([k]) => !only || k === 'PATH' || only(k))),
      },
    );
    return JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>;
  };

  it('the ingress bundle stores a message in the MySQL mailbox; the poller bundle reads it', async () => {
    const text = wire({ TYPE: 'LDM', SEQN: 'bundle-1' });
    const sent = await invoke('ingress', {
      httpMethod: 'POST',
      path: '/cminmsgs/send',
      headers: { 'Content-Type': 'application/xml' },
      queryStringParameters: null,
      body: text,
      isBase64Encoded: false,
      requestContext: { identity: { userArn: null, caller: null } },
    });
    expect(sent).toMatchObject({ statusCode: 200 });
    const id = Number(sent.body);
    const rows = await my.query<{ MSG_TEXT: string }[]>('SELECT MSG_TEXT FROM CMINMSGS WHERE ID = ?', [id]);
    expect(rows.map((r) => r.MSG_TEXT)).toEqual([text]);

    // As the stack binds it: the poller has the mailbox and no Kafka.
    expect(await invoke('poller', 'scheduled', (k) => k !== 'MSGX_KAFKA_BROKERS')).toMatchObject({
      role: 'poller',
      acquired: true,
      errors: 0,
    });
    const enqueued = await pg.db.query<{ n: number }>('SELECT count(*)::int AS n FROM proc_state WHERE msg_id = $1', [id]);
    expect(enqueued.rows[0]!.n).toBe(1);
  });

  it('the dispatcher bundle runs without a mailbox, as the stack binds it (Kafka, no mailbox)', async () => {
    expect(await invoke('dispatcher', 'scheduled', (k) => k !== 'MSGX_MAILBOX_URL')).toMatchObject({
      role: 'dispatcher',
      acquired: true,
      errors: 0,
    });
  });
});
