import type { Config } from '../config/config.ts';
import type { UrlSources } from '../config/secrets.ts';
import type { Db } from '../db/db.ts';
import { migrate, type MigrateResult } from '../db/migrate.ts';
import { reaching } from './serviceErrors.ts';
import { openDb } from '../db/open.ts';
import { mailboxDdlFiles, openMailbox } from '../mailbox/open.ts';
import { describeMarkColumns, type Mailbox } from '../mailbox/mailbox.ts';
import { checkIdentityMode } from '../pipeline/identityMode.ts';
import { createLogger, type Log } from '../observability/logger.ts';
import { defaultRegistry } from './registry.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import type { AppContext } from './context.ts';
import { POOL_SIZE } from '../constants.ts';

/** A statement running longer than this is a bug or a lock wait gone wrong: cancelled, and the step retried. */
const STATEMENT_TIMEOUT_MS = 60_000;

/**
 * Builds the context once per process: database, mailbox, processors, clock, logger. Lambda
 * functions call it at cold start; the twin at start. `statementTimeoutMs` stays below the
 * function timeout so a frozen statement never holds a lock past its worker.
 */
export async function buildContext(
  config: Config,
  options: {
    migrate?: boolean;
    clock?: Clock;
    log?: Log;
    statementTimeoutMs?: number;
    poolSize?: number;
    checkIdentity?: boolean;
    /** Re-read the database URLs after a refused login (the cloud: lib/config/secrets.ts). */
    credentials?: UrlSources;
  } = {},
): Promise<AppContext> {
  const log = options.log ?? createLogger('msgx', config.logLevel === 'SILENT' ? 'SILENT' : config.logLevel);
  const applied: string[] = [];
  const onProgress = (name: string, i: number, n: number) => {
    applied.push(name);
    log.info(`migration ${i}/${n} applied`, { name });
  };
  const db = await openDb(config, {
    statementTimeoutMs: options.statementTimeoutMs ?? STATEMENT_TIMEOUT_MS,
    max: options.poolSize ?? (config.runtime === 'lambda' ? POOL_SIZE.lambda : POOL_SIZE.twin),
    refreshUrl: options.credentials?.pg,
    // A new embedded database comes migrated, with the twin's mailbox tables (lib/db/pgliteDir.ts):
    // migrate() and openMailbox() below find them there, as on a restart.
    migrateOnCreate: options.migrate ? { onProgress, then: mailboxDdlFiles(config) } : undefined,
  });
  let mailbox;
  try {
    // The first statements reach the database: a wrong MSGX_PG_URL is named here, in one line.
    await reaching('MSGX_PG_URL', config.pgUrl ?? '', async () => {
      if (options.migrate) {
        await migrate(db, { onProgress });
        if (applied.length) log.info('migrations applied', { applied });
      }
      // The identity algorithm in force must be the configured one (a ConfigError of one line if not).
      if (options.checkIdentity !== false)
        await checkIdentityMode(db, config.pipeline.identityDayBoundary, (options.clock ?? systemClock).now());
    });
    mailbox = await reaching('MSGX_MAILBOX_URL', config.mailboxUrl ?? '', () =>
      openMailbox(config, db, { refreshUrl: options.credentials?.mailbox }),
    );
    if (config.mailboxUrl || config.runtime === 'twin') await logMarkColumns(mailbox, log);
  } catch (err) {
    // The embedded database's directory lock goes with it.
    await db.close().catch(() => {});
    throw err;
  }
  return { config, db, mailbox, clock: options.clock ?? systemClock, log, registry: defaultRegistry() };
}

/**
 * The deploy-time migration: the database alone, migrated before anything reads msgx's tables (a
 * new database has none), then the identity check, so a MSGX_IDENTITY_DAY_BOUNDARY that disagrees
 * with the stored messages fails the deploy instead of every function's start. The caller closes `db`.
 */
export async function openMigrated(
  config: Config,
  options: { log: Log; clock?: Clock; statementTimeoutMs?: number; credentials?: UrlSources },
): Promise<{ db: Db; result: MigrateResult }> {
  const db = await openDb(config, {
    statementTimeoutMs: options.statementTimeoutMs,
    max: POOL_SIZE.migrate,
    refreshUrl: options.credentials?.pg,
  });
  try {
    const result = await reaching('MSGX_PG_URL', config.pgUrl ?? '', async () => {
      const r = await migrate(db, { onProgress: (name, i, n) => options.log.info(`migration ${i}/${n} applied`, { name }) });
      await checkIdentityMode(db, config.pipeline.identityDayBoundary, (options.clock ?? systemClock).now());
      return r;
    });
    return { db, result };
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }
}

/**
 * Says at start which back-fill columns the mailbox has (only those are written). A mailbox that
 * does not answer yet is no reason to refuse the start: the first back-fill looks again.
 */
async function logMarkColumns(mailbox: Mailbox, log: Log): Promise<void> {
  try {
    log.info('mailbox back-fill columns', { table: 'CMINMSGS', writes: describeMarkColumns(await mailbox.markColumns()) });
  } catch (err) {
    log.warn('mailbox columns not known yet; the first back-fill looks them up', { error: String(err) });
  }
}

export async function closeContext(ctx: AppContext): Promise<void> {
  await ctx.mailbox.close().catch(() => {});
  await ctx.db.close().catch(() => {});
}
