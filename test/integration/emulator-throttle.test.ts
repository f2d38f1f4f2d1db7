import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpApi } from '../cloud/emulator/api.ts';
import { apiIntegration, type FunctionCode, LambdaError, LambdaService } from '../cloud/emulator/lambda.ts';

/**
 * The emulated Lambda honours a function's ReservedConcurrentExecutions as Lambda does: an
 * invocation beyond it is throttled (429 TooManyRequestsException) before any environment starts,
 * and API Gateway answers a throttled integration 500. Judged from outside: the invoke's answer,
 * the HTTP status a caller sees, and what the handler itself counted.
 */
const dir = mkdtempSync(join(tmpdir(), 'msgx-throttle-'));
const NAME = 'msgx-dev-Ingress';
const ARN = `arn:aws:lambda:eu-west-1:210987654321:function:${NAME}`;
let lambda: LambdaService;
let api: HttpApi;

beforeAll(async () => {
  // Holds each invocation for `ms` and says how many this environment has run.
  writeFileSync(
    join(dir, 'index.mjs'),
    `let runs = 0;
export const handler = async (event) => {
  runs++;
  const ms = Number(event.ms ?? JSON.parse(event.body ?? '{}').ms ?? 400);
  await new Promise((r) => setTimeout(r, ms));
  return { statusCode: 200, body: JSON.stringify({ pid: process.pid, runs }) };
};
`,
  );
  lambda = new LambdaService({ region: 'eu-west-1', account: '210987654321', environment: () => ({}), logDir: dir });
  const latest: FunctionCode = {
    functionName: NAME,
    version: '$LATEST',
    codeDir: dir,
    codeKey: 'throttle.zip',
    handler: 'index.handler',
    runtime: 'nodejs22.x',
    timeoutSeconds: 10,
    memoryMb: 128,
    environment: {},
    secretsExtension: false,
    reservedConcurrency: 2,
  };
  lambda.functions.set(NAME, {
    name: NAME,
    arn: ARN,
    logicalId: 'Ingress',
    latest,
    // A version published before the reservation was set: the reservation is the function's.
    versions: new Map([['1', { ...latest, version: '1', reservedConcurrency: undefined }]]),
    aliases: new Map([['live', '1']]),
    asyncRetries: 2,
  });
  api = new HttpApi('throttle', { account: '210987654321', region: 'eu-west-1', invoke: apiIntegration(lambda) });
  api.routes = [
    {
      routeKey: 'POST /send',
      authorizationType: 'NONE',
      integration: { functionArn: `${ARN}:live`, payloadFormatVersion: '2.0', timeoutMs: 10_000 },
    },
  ];
  await api.start();
});

afterAll(async () => {
  await api?.close();
  await lambda?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('emulated Lambda: reserved concurrency', () => {
  it('throttles invocations beyond ReservedConcurrentExecutions with 429 TooManyRequestsException, starting no environment for them', async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, () =>
        lambda.invoke(NAME, { ms: 800 }, { qualifier: 'live' }).then(
          (r) => ({ ok: r.ok, body: (r.payload as { body: string }).body }),
          (err: unknown) => ({ err }),
        ),
      ),
    );
    const ran = outcomes.filter((o) => 'ok' in o && o.ok);
    const throttled = outcomes.filter((o) => 'err' in o);
    expect(ran).toHaveLength(2);
    expect(throttled).toHaveLength(3);
    for (const t of throttled) {
      expect(t.err).toBeInstanceOf(LambdaError);
      expect(t.err).toMatchObject({ status: 429, type: 'TooManyRequestsException' });
    }
    // Two environments ran one invocation each; none was started for the throttled three.
    const pids = new Set(ran.map((r) => (JSON.parse((r as { body: string }).body) as { pid: number }).pid));
    expect(pids.size).toBe(2);
    expect(lambda.environments(NAME)).toBe(2);
    // Once they finish, the next invocations run again, in the same two environments.
    const again = await Promise.all([1, 2].map(() => lambda.invoke(NAME, { ms: 10 }, { qualifier: 'live' })));
    expect(again.map((r) => r.ok)).toEqual([true, true]);
    expect(lambda.environments(NAME)).toBe(2);
  });

  it('API Gateway answers a throttled integration 500 {"message":"Internal Server Error"}; the rest are answered', async () => {
    const answers = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const res = await fetch(`${api.url}/send`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"ms":800}' });
        return { status: res.status, body: await res.text() };
      }),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(2);
    const refused = answers.filter((a) => a.status !== 200);
    expect(refused).toHaveLength(2);
    for (const r of refused) {
      expect(r.status).toBe(500);
      expect(JSON.parse(r.body)).toEqual({ message: 'Internal Server Error' });
    }
  });
});
