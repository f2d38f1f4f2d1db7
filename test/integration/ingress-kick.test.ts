import type { APIGatewayProxyEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
import { fakeLambda, type FakeLambda } from '../helpers/fakeAws.ts';
import { randomTopic } from '../helpers/kafka.ts';
import { wire } from '../helpers/pipeline.ts';
import { freshMysql, freshPg, serviceUrls, type TestMysql, type TestPg } from '../helpers/services.ts';

/**
 * The ingress's kick, end to end: functions/ingress.ts stores a message and, with no pump or
 * poller live, starts both through the real AWS SDK Lambda client (imported on the first kick,
 * not at cold start) against a local stand-in of the Lambda Invoke API.
 */
describe('ingress kicks the pump and the poller through Lambda', () => {
  let pg: TestPg;
  let my: TestMysql;
  let lambda: FakeLambda;
  const saved = { ...process.env };

  beforeAll(async () => {
    pg = await freshPg();
    my = await freshMysql();
    lambda = await fakeLambda();
    Object.assign(process.env, {
      MSGX_RUNTIME: 'lambda',
      MSGX_PG_URL: pg.url,
      MSGX_MAILBOX_URL: my.url,
      MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
      MSGX_TOPIC_MSG: randomTopic('msgx.msg'),
      MSGX_TOPIC_SCHD: randomTopic('msgx.schd'),
      MSGX_LOG_LEVEL: 'ERROR',
      MSGX_PUMP_FUNCTION_NAME: 'msgx-test-pump',
      MSGX_POLLER_FUNCTION_NAME: 'msgx-test-poller',
      // What the SDK finds in a Lambda environment, pointed at the stand-in.
      AWS_ENDPOINT_URL_LAMBDA: lambda.endpoint,
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'AKIDFAKE',
      AWS_SECRET_ACCESS_KEY: 'fake',
    });
  });
  afterAll(async () => {
    process.env = saved;
    const { lambdaContext } = await import('../../lib/jobs/coldStart.ts');
    const ctx = await lambdaContext().catch(() => undefined);
    await ctx?.mailbox.close();
    await ctx?.db.close();
    await lambda?.close();
    await my?.drop();
    await pg?.drop();
  });

  const send = (seqn: string) =>
    ({
      httpMethod: 'POST',
      path: '/cminmsgs/send',
      headers: { 'Content-Type': 'application/xml' },
      queryStringParameters: null,
      body: wire({ TYPE: 'LDM', SEQN: seqn }),
      isBase64Encoded: false,
      requestContext: { identity: { userArn: null, caller: null } },
    }) as unknown as APIGatewayProxyEvent;

  it('invokes both asynchronously when none is live, and neither while they are', async () => {
    const { handler: ingress } = await import('../../functions/ingress.ts');
    expect((await ingress(send('kick-1'))).statusCode).toBe(200);
    expect(lambda.invocations).toEqual([
      { functionName: 'msgx-test-pump', type: 'Event' },
      { functionName: 'msgx-test-poller', type: 'Event' },
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
