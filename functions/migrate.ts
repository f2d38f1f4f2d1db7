import { migrate } from '../lib/db/migrate.ts';
import { ensureAppUser } from '../lib/db/appUser.ts';
import { appUserFromSecret } from '../lib/config/secrets.ts';
import { lambdaContext } from '../lib/jobs/coldStart.ts';
import { topicForTarget } from '../lib/outbox/publish.ts';
import { ensureTopics } from '../lib/outbox/topics.ts';

/** Deploy-time trigger: apply pending migrations, grant the functions' user, create the topics. */
export async function handler(): Promise<{ applied: string[]; alreadyApplied: number; topicsCreated: string[] }> {
  const ctx = await lambdaContext();
  const result = await migrate(ctx.db, { onProgress: (name, i, n) => ctx.log.info(`migration ${i}/${n} applied`, { name }) });
  const appUser = await appUserFromSecret(process.env);
  if (appUser) ctx.log.info('functions user ready', { user: appUser.username, ...(await ensureAppUser(ctx.db, appUser)) });
  // The topics producers may name (MSGX_TX_TOPICS) are created with the configured partitions too.
  const listed = ctx.config.txmsg.topics.map((t) => topicForTarget(ctx.config, `tx:${t}`)!);
  const topics = await ensureTopics(ctx.config, listed, { log: ctx.log });
  ctx.log.info('deploy-time setup done', { ...result, topics });
  return { ...result, topicsCreated: topics.created };
}
