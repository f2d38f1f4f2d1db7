/**
 * Once per fault run: a private MariaDB and a private Kafka broker (privateServices.ts) that the
 * scenarios may SIGKILL, handed to every test file through `inject('faultServices')`
 * (privateEnv.ts points MSGX_MAILBOX_URL / MSGX_KAFKA_BROKERS at them). Stopped at the end, and
 * their directories removed only when the run passed.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { kafkaStart, kafkaStop, type KafkaInstance, mariadbStart, mariadbStop, type MariadbInstance } from './privateServices.ts';
import { freePort } from '../helpers/freePort.ts';

export interface FaultServices {
  kafka: KafkaInstance;
  mariadb: MariadbInstance;
  kafkaBrokers: string;
  mailboxUrl: string;
  /** The directory holding both services' directories. */
  root: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    faultServices: FaultServices;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const root = join(tmpdir(), `msgx-faults-services-${process.pid}-${Date.now().toString(36)}`);
  const kafka: KafkaInstance = { dir: join(root, 'kafka'), port: await freePort(), controllerPort: await freePort() };
  const mariadb: MariadbInstance = { dir: join(root, 'mariadb'), port: await freePort() };
  const [kafkaBrokers, mailboxUrl] = await Promise.all([kafkaStart(kafka), mariadbStart(mariadb)]);
  await mariadbQuery(mailboxUrl, 'CREATE DATABASE IF NOT EXISTS test');
  project.provide('faultServices', { kafka, mariadb, kafkaBrokers, mailboxUrl: `${mailboxUrl}test`, root });
  process.stderr.write(`[faults] private Kafka ${kafkaBrokers}, private MariaDB ${mailboxUrl} (in ${root})\n`);
  return async () => {
    // Whatever state a scenario left them in: stop both (SIGKILL: InnoDB and the broker recover
    // their data on a later start, should someone start them on a kept directory).
    await kafkaStop(kafka, true).catch(() => {});
    await mariadbStop(mariadb, true).catch(() => {});
    // A failed run keeps both directories (data and logs): a test file that failed wrote KEEP with
    // its evidence directory; a run that failed anywhere else (a file that did not even start its
    // run) is caught by the run's own results.
    const keep = join(root, 'KEEP');
    const failed = project.vitest.state.getFailedFilepaths().length > 0 || project.vitest.state.getCountOfFailedTests() > 0;
    if (existsSync(keep)) process.stderr.write(`[faults] kept ${root} for the evidence in ${readFileSync(keep, 'utf8').trim()}\n`);
    else if (failed) process.stderr.write(`[faults] the run failed: kept the private services' directories in ${root}\n`);
    else rmSync(root, { recursive: true, force: true });
  };
}

async function mariadbQuery(url: string, sql: string): Promise<void> {
  const { default: mysql } = await import('mysql2/promise');
  const c = await mysql.createConnection({ uri: url });
  await c.query(sql);
  await c.end();
}
