import type { Config } from '../config/config.ts';
import type { UrlSources } from '../config/secrets.ts';
import { migrate } from '../db/migrate.ts';
import { openDb } from '../db/open.ts';
import { openMailbox } from '../mailbox/open.ts';
import { checkIdentityMode } from '../pipeline/identityMode.ts';
import { createLogger, type Log } from '../observability/logger.ts';
import { defaultRegistry } from './registry.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import type { AppContext } from './context.ts';

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
  const db = await openDb(config, {
    statementTimeoutMs: options.statementTimeoutMs ?? 60_000,
    max: options.poolSize ?? (config.runtime === 'lambda' ? 3 : 10),
    refreshUrl: options.credentials?.pg,
  });
  if (options.migrate) {
    const r = await migrate(db, { onProgress: (name, i, n) => log.info(`migration ${i}/${n} applied`, { name }) });
    if (r.applied.length) log.info('migrations applied', { applied: r.applied });
  }
  // The identity algorithm in force must be the configured one (a ConfigError of one line if not).
  if (options.checkIdentity !== false) {
    try {
      await checkIdentityMode(db, config.pipeline.identityDayBoundary, (options.clock ?? systemClock).now());
    } catch (err) {
      await db.close().catch(() => {});
      throw err;
    }
  }
  const mailbox = await openMailbox(config, db, { refreshUrl: options.credentials?.mailbox });
  return { config, db, mailbox, clock: options.clock ?? systemClock, log, registry: defaultRegistry() };
}

export async function closeContext(ctx: AppContext): Promise<void> {
  await ctx.mailbox.close().catch(() => {});
  await ctx.db.close().catch(() => {});
}
