import type { Context } from 'aws-lambda';
import { openMigrated } from '../lib/app/buildContext.ts';
import { ensureAppUser } from '../lib/db/appUser.ts';
import { pauseAtStart } from '../lib/pipeline/pause.ts';
import { appUserFromSecret } from '../lib/config/secrets.ts';
import { LAMBDA_STATEMENT_TIMEOUT_MS, lambdaConfig } from '../lib/jobs/coldStart.ts';
import { createLogger } from '../lib/observability/logger.ts';
import { ensureTopics } from '../lib/outbox/topics.ts';
import { listedTxTopics } from '../lib/txmsg/topics.ts';

/** Kept back from the invocation's time: a migration statement is cancelled before Lambda kills the run. */
const STOP_MARGIN_MS = 20_000;

/**
 * Deploy-time trigger: apply pending migrations (on an empty database too: nothing reads msgx's
 * tables first), grant the functions' user, create the topics. Opens what it needs and closes it:
 * it runs once per deploy.
 */
export async function handler(
  _event?: unknown,
  lambda?: Pick<Context, 'getRemainingTimeInMillis'>,
): Promise<{ applied: string[]; alreadyApplied: number; topicsCreated: string[] }> {
  const { config, credentials } = await lambdaConfig();
  const log = createLogger('msgx', config.logLevel);
  // A migration may rewrite a large table: it may take the invocation's time, not a step's.
  const statementTimeoutMs = Math.max(LAMBDA_STATEMENT_TIMEOUT_MS, (lambda?.getRemainingTimeInMillis() ?? 0) - STOP_MARGIN_MS);
  const { db, result } = await openMigrated(config, { log, statementTimeoutMs, credentials });
  try {
    // "No auto-start" (MSGX_START_PAUSED): each deploy pauses head processing before new code runs.
    if (await pauseAtStart(db, config.roles.startPaused, 'deploy migration (MSGX_START_PAUSED)', new Date()))
      log.info('pipeline paused at start');
    const appUser = await appUserFromSecret(process.env);
    if (appUser) log.info('functions user ready', { user: appUser.username, ...(await ensureAppUser(db, appUser)) });
    // The topics producers may name (MSGX_TX_TOPICS) are created with the configured partitions too.
    const listed = listedTxTopics(config);
    const topics = await ensureTopics(config, listed, { log });
    log.info('deploy-time setup done', { ...result, topics });
    return { ...result, topicsCreated: topics.created };
  } finally {
    await db.close().catch(() => {});
  }
}
