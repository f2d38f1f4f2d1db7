import { migrate } from '../lib/db/migrate.ts';
import { lambdaContext } from '../lib/jobs/coldStart.ts';
import { topicForTarget } from '../lib/outbox/publish.ts';
import { ensureTopics } from '../lib/outbox/topics.ts';

/** Deploy-time trigger: apply pending migrations and create the topics before traffic arrives. */
export async function handler(): Promise<{ applied: string[]; alreadyApplied: number; topicsCreated: string[] }> {
  const ctx = await lambdaContext();
  const result = await migrate(ctx.db, { onProgress: (name, i, n) => ctx.log.info(`migration ${i}/${n} applied`, { name }) });
  // The topics producers may name (MSGX_TX_TOPICS) are created with the configured partitions too.
  const listed = ctx.config.txmsg.topics.map((t) => topicForTarget(ctx.config, `tx:${t}`)!);
  const topics = await ensureTopics(ctx.config, listed, { log: ctx.log });
  ctx.log.info('deploy-time setup done', { ...result, topics });
  return { ...result, topicsCreated: topics.created };
}
