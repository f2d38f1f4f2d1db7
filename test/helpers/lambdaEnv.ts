import { randomTopic } from './kafka.ts';
import { freshMysql, freshPg, serviceUrls, type TestMysql, type TestPg } from './services.ts';

/**
 * The databases and settings a deployed function runs with: a fresh PostgreSQL and MariaDB
 * database, the shared broker and topic names of their own (not created). `env` is what the
 * function's environment holds for them.
 */
export interface FunctionServices {
  pg: TestPg;
  my: TestMysql;
  env: Record<string, string>;
  drop(): Promise<void>;
}

export async function functionServices(): Promise<FunctionServices> {
  const pg = await freshPg();
  const my = await freshMysql();
  return {
    pg,
    my,
    env: {
      MSGX_PG_URL: pg.url,
      MSGX_MAILBOX_URL: my.url,
      MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
      MSGX_TOPIC_MSG: randomTopic('msgx.msg'),
      MSGX_TOPIC_SCHD: randomTopic('msgx.schd'),
      MSGX_TOPIC_OFFSETS: randomTopic('msgx.offsets'),
      MSGX_LOG_LEVEL: 'ERROR',
    },
    async drop() {
      await my.drop();
      await pg.drop();
    },
  };
}

export type LambdaFunction = FunctionServices & { end(): Promise<void> };

/**
 * This process as a Lambda function's: MSGX_RUNTIME=lambda, the services' settings and `extra`
 * in process.env. end() puts process.env back, closes what lambdaContext() opened and drops the
 * databases.
 */
export async function asLambdaFunction(extra: Record<string, string> = {}): Promise<LambdaFunction> {
  const saved = { ...process.env };
  const services = await functionServices();
  Object.assign(process.env, { MSGX_RUNTIME: 'lambda', ...services.env, ...extra });
  return {
    ...services,
    async end() {
      process.env = saved;
      const { lambdaContext } = await import('../../lib/jobs/coldStart.ts');
      const ctx = await lambdaContext().catch(() => undefined);
      await ctx?.mailbox.close();
      await ctx?.db.close();
      await services.drop();
    },
  };
}
