import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
import { fakeLambda, type FakeLambda } from '../helpers/fakeAws.ts';
import { apiGatewayEvent } from '../helpers/apiGatewayEvent.ts';
import { asLambdaFunction, type LambdaFunction } from '../helpers/lambdaEnv.ts';
import { wire } from '../helpers/pipeline.ts';
import type { TestPg } from '../helpers/services.ts';

/**
 * The ingress's kick, end to end: functions/ingress.ts stores a message and, with no pump or
 * poller live, starts both through the real AWS SDK Lambda client (imported on the first kick,
 * not at cold start) against a local stand-in of the Lambda Invoke API.
 */
describe('ingress kicks the pump and the poller through Lambda', () => {
  let fn: LambdaFunction;
  let pg: TestPg;
  let lambda: FakeLambda;

  beforeAll(async () => {
    lambda = await fakeLambda();
    fn = await asLambdaFunction({
      MSGX_PUMP_FUNCTION_NAME: 'msgx-test-pump',
      MSGX_POLLER_FUNCTION_NAME: 'msgx-test-poller',
      // What the SDK finds in a Lambda environment, pointed at the stand-in.
      AWS_ENDPOINT_URL_LAMBDA: lambda.endpoint,
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'AKIDFAKE',
      AWS_SECRET_ACCESS_KEY: 'fake',
    });
    pg = fn.pg;
  });
  afterAll(async () => {
    await fn?.end();
    await lambda?.close();
  });

  const send = (seqn: string) => apiGatewayEvent('POST', '/cminmsgs/send', wire({ TYPE: 'LDM', SEQN: seqn }));

  it('invokes both asynchronously when none is live, and neither while they are', async () => {
    const { handler: ingress } = await import('../../functions/ingress.ts');
    expect((await ingress(send('kick-1'))).statusCode).toBe(200);
    // Sent together, they may arrive in either order.
    const byName = (a: { functionName: string }, b: { functionName: string }) => a.functionName.localeCompare(b.functionName);
    expect([...lambda.invocations].sort(byName)).toEqual([
      { functionName: 'msgx-test-poller', type: 'Event' },
      { functionName: 'msgx-test-pump', type: 'Event' },
    ]);

    const pump = await tryRoleLock(pg.db, 'pump');
    const poller = await tryRoleLock(pg.db, 'poller');
    try {
      expect((await ingress(send('kick-2'))).statusCode).toBe(200);
      expect(lambda.invocations).toHaveLength(2);
    } finally {
      await pump!.release();
      await poller!.release();
    }
  });
});
