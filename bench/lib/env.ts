import { randomBytes } from 'node:crypto';
import { loadConfig, type Config } from '../../lib/config/config.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { ProcessorRegistry } from '../../lib/pipeline/processor.ts';
import type { Clock } from '../../lib/shared/clock.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';
import { defaultRegistry } from '../../lib/app/registry.ts';
import type { Db } from '../../lib/db/db.ts';
import type { Mailbox } from '../../lib/mailbox/mailbox.ts';

export { freshMysql, freshPg, serviceUrls, type TestPg } from '../../test/helpers/services.ts';

export const randomName = (prefix: string) => `${prefix}.${Date.now().toString(36)}.${randomBytes(3).toString('hex')}`;

/** The real context the functions build: real registry, system clock, silent log. */
export function benchContext(o: {
  db: Db;
  mailbox: Mailbox;
  env?: Record<string, string>;
  registry?: ProcessorRegistry;
  clock?: Clock;
}): AppContext & { config: Config } {
  return {
    config: loadConfig({ MSGX_RUNTIME: 'twin', MSGX_LOG_LEVEL: 'SILENT', ...o.env }),
    db: o.db,
    mailbox: o.mailbox,
    clock: o.clock ?? systemClock,
    log: silentLog,
    registry: o.registry ?? defaultRegistry(),
  };
}

/**
 * Other engineers' fault tests stop and start the shared services; before each scenario make
 * sure all three answer (`scripts/services.mjs up` is idempotent and quick when they do).
 */
export async function ensureServices(): Promise<void> {
  const { spawnSync } = await import('node:child_process');
  const root = new URL('../../', import.meta.url).pathname;
  const r = spawnSync(process.execPath, ['scripts/services.mjs', 'up', '--quiet-stdout'], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'pipe'],
    timeout: 180_000,
  });
  if (r.status !== 0) throw new Error(`services up failed: ${r.stderr?.toString().slice(-500)}`);
}
