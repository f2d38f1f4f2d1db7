import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { randomTopic } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, type TestPg } from '../helpers/services.ts';

/**
 * Issue 13 as an operator sees it: the twin (child process) on PostgreSQL and the real broker,
 * with a fan-out webhook whose receiver is down (connection refused), and an event for a topic
 * the cluster does not have. Debian's Chromium opens the console: the overview says delivery is
 * not moving, shows the stalled target with its age and reason, and names the missing topic.
 */
const ROOT = process.cwd();
const ARTIFACTS = join(ROOT, 'test', 'artifacts');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createNetServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

describe('the console shows delivery that does not move', () => {
  let pg: TestPg;
  let dataDir: string;
  let twin: ChildProcess;
  let twinLog = '';
  let base: string;
  let browser: BrowserContext;
  const missing = randomTopic('msgx-nowhere');

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    pg = await freshPg({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'msgx-e2e-stalled-'));
    const port = await freePort();
    const hookPort = await freePort(); // nothing listens there: the receiver is down
    base = `http://127.0.0.1:${port}`;
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('MSGX_')) delete env[k];
    Object.assign(env, {
      MSGX_PG_URL: pg.url,
      MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
      MSGX_TOPIC_MSG: randomTopic('msgx-msg'),
      MSGX_TOPIC_SCHD: randomTopic('msgx-schd'),
      MSGX_FANOUT_WEBHOOKS: `http://127.0.0.1:${hookPort}/hook`,
      MSGX_DATA_DIR: join(dataDir, '.msgx'),
      MSGX_HTTP_PORT: String(port),
      MSGX_DELIVERY_POLL_INTERVAL: '200ms',
      MSGX_DELIVERY_INITIAL_BACKOFF: '500ms',
      MSGX_STALE_TARGET_AFTER: '2s',
      MSGX_LOG_LEVEL: 'ERROR',
    });
    twin = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'lib/twin/main.ts')], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    twin.stdout!.on('data', (d: Buffer) => (twinLog += d.toString()));
    twin.stderr!.on('data', (d: Buffer) => (twinLog += d.toString()));
    const end = Date.now() + 40_000;
    for (;;) {
      if (twin.exitCode !== null) throw new Error(`the twin exited with ${twin.exitCode}\n${twinLog.slice(-3000)}`);
      if (
        await fetch(`${base}/health`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      if (Date.now() > end) throw new Error(`the twin did not answer /health\n${twinLog.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    browser = await chromium.launchPersistentContext(join(dataDir, 'chromium'), {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
      viewport: { width: 1400, height: 1000 },
    });
  }, 90_000);

  afterAll(async () => {
    await browser?.close().catch(() => {});
    twin?.kill('SIGTERM');
    await new Promise((r) => (twin?.exitCode !== null ? r(null) : twin.once('exit', r)));
    rmSync(dataDir, { recursive: true, force: true });
    await pg?.drop();
  }, 60_000);

  it('says delivery is not moving: the stalled target with its age and reason, and the missing topic', async () => {
    await enqueueEvents(pg.db, [
      { target: 'msg', key: 'F1', type: 'FLIGHT_UPDATED', value: { a: 1 } },
      { target: `tx:${missing}`, key: 'k', type: 'TX_MESSAGE', value: 'x' },
    ]);
    const page = browser.pages()[0] ?? (await browser.newPage());
    await page.goto(`${base}/console`);
    // The overview refreshes itself; the target is stale after 2 s and stalled from its first try.
    const stalled = page.locator('[data-test="target-stalled"]');
    await stalled.first().waitFor({ timeout: 30_000 });
    expect(await stalled.first().textContent()).toMatch(/^STALLED \d/);
    expect(await stalled.first().getAttribute('title')).toMatch(/webhook:.*(ECONNREFUSED|unreachable)/);
    const callout = page.locator('[data-test="delivery-problems"]');
    await page.locator('[data-test="stale-target"]').first().waitFor({ timeout: 30_000 });
    const text = (await callout.textContent()) ?? '';
    expect(text).toMatch(/msg head #\d+ waiting .* stalled .*destination unreachable/);
    expect(await page.locator('[data-test="missing-topic"]').textContent()).toContain(missing);
    await page.screenshot({ path: join(ARTIFACTS, 'console-stalled.png'), fullPage: true });
  }, 60_000);
});
