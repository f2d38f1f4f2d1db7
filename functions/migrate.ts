import { migrate } from '../lib/db/migrate.ts';
import { lambdaContext } from '../lib/jobs/coldStart.ts';

/** Deploy-time trigger: apply pending migrations (and create topics) before traffic arrives. */
export async function handler(): Promise<{ applied: string[]; alreadyApplied: number }> {
  const ctx = await lambdaContext();
  const result = await migrate(ctx.db, { onProgress: (name, i, n) => ctx.log.info(`migration ${i}/${n} applied`, { name }) });
  ctx.log.info('migrations done', { ...result });
  return result;
}
