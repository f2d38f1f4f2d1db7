import { rmSync } from 'node:fs';
import type { Browser } from './chromium.ts';
import type { TestPg } from './services.ts';
import type { Twin } from './twinChild.ts';

/**
 * The end of a console browser test, whatever of it was started: the browser closed, the twin
 * stopped (SIGKILLed if SIGTERM has not ended it in 8 s), its database dropped and its data
 * directory removed.
 */
export async function closeConsoleTest(o: { browser?: Browser; twin?: Twin; pg?: TestPg; dataDir?: string }): Promise<void> {
  await o.browser?.context.close().catch(() => {});
  await o.twin?.stop('SIGTERM', { killAfterMs: 8000 });
  await o.pg?.drop().catch(() => {});
  if (o.dataDir) rmSync(o.dataDir, { recursive: true, force: true });
}
