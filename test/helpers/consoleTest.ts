import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { type Browser, openChromium } from './chromium.ts';
import { freshPg, type TestPg } from './services.ts';
import { startBareTwin, type Twin } from './twinChild.ts';

/** What a console browser test runs against (startConsoleTest). */
export interface ConsoleTest {
  /** Its own PostgreSQL database, which the twin migrates at start (as `npm start` does). */
  pg: TestPg;
  /** Its own directory: the twin's data (`.msgx`) and Chromium's profile. */
  dataDir: string;
  twin: Twin;
  /** The twin's URL. */
  base: string;
  browser: Browser;
  /** The browser's first tab. */
  page: Page;
  /**
   * Ends it: the browser closed, the twin stopped (SIGKILLed if SIGTERM has not ended it in
   * 8 s), the servers closed, the database dropped and the directory removed.
   */
  close(): Promise<void>;
}

/**
 * The bare twin (startBareTwin) with `env` on a fresh database and directory, and Debian's
 * Chromium. `servers` (stand-ins the test started for the twin to call) are closed with the rest.
 */
export async function startConsoleTest(
  env: Record<string, string>,
  o: { servers?: Server[]; viewport?: { width: number; height: number } } = {},
): Promise<ConsoleTest> {
  const pg = await freshPg({ migrate: false });
  const dataDir = mkdtempSync(join(tmpdir(), 'msgx-e2e-'));
  const t: Partial<ConsoleTest> = { pg, dataDir };
  const close = async () => {
    await t.browser?.context.close().catch(() => {});
    await t.twin?.stop('SIGTERM', { killAfterMs: 8000 });
    for (const s of o.servers ?? []) await new Promise((r) => s.close(r));
    await pg.drop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    t.twin = await startBareTwin({ MSGX_PG_URL: pg.url, MSGX_DATA_DIR: join(dataDir, '.msgx'), ...env });
    t.browser = await openChromium(join(dataDir, 'chromium'), o.viewport);
  } catch (err) {
    await close();
    throw err;
  }
  return { pg, dataDir, twin: t.twin, base: t.twin.base, browser: t.browser, page: t.browser.page, close };
}
