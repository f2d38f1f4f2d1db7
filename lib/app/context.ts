import type { Config } from '../config/config.ts';
import type { Db } from '../db/db.ts';
import type { Mailbox } from '../mailbox/mailbox.ts';
import type { Log } from '../observability/logger.ts';
import type { ProcessorRegistry } from '../pipeline/processor.ts';
import type { Clock } from '../shared/clock.ts';

/**
 * What every role and route needs, built once per process (cold start or twin start) and passed
 * down explicitly. Tests build it with a fake clock and their own databases.
 */
export interface AppContext {
  config: Config;
  db: Db;
  mailbox: Mailbox;
  clock: Clock;
  log: Log;
  registry: ProcessorRegistry;
}
