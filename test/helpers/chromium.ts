import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

/**
 * Debian's Chromium (/usr/bin/chromium) driven by playwright-core, headless, for the console's
 * end-to-end tests. Screenshots go to test/artifacts/ (gitignored).
 */
const ARTIFACTS = join(process.cwd(), 'test', 'artifacts');
const EXECUTABLE = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

export interface Browser {
  context: BrowserContext;
  /** The first tab. */
  page: Page;
  /** Script errors any page of the browser threw, in order (a console page must throw none). */
  pageErrors: string[];
  /** A full-page screenshot of the first tab, test/artifacts/<name>.png. */
  shot(name: string): Promise<Buffer>;
}

/** Starts Chromium with its profile in `userDataDir` (the caller removes it). */
export async function openChromium(userDataDir: string, viewport = { width: 1360, height: 900 }): Promise<Browser> {
  // A fresh machine may lack it: fail with what to do (.ci/run installs it), never skip.
  if (!existsSync(EXECUTABLE))
    throw new Error(`the console's browser tests need Debian's Chromium at ${EXECUTABLE}: apt-get install chromium (as .ci/run does)`);
  mkdirSync(ARTIFACTS, { recursive: true });
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: EXECUTABLE,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  return { context, page, pageErrors, shot: (name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true }) };
}
