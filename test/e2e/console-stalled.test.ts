import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { type Browser, openChromium } from '../helpers/chromium.ts';
import { closeConsoleTest } from '../helpers/consoleTeardown.ts';
import { freePort } from '../helpers/freePort.ts';
import { randomTopic } from '../helpers/kafka.ts';
import { freshPg, serviceUrls, type TestPg } from '../helpers/services.ts';
import { startBareTwin, type Twin } from '../helpers/twinChild.ts';

/**
 * Issue 13 as an operator sees it: the twin (child process) on PostgreSQL and the real broker,
 * with a fan-out webhook whose receiver is down (connection refused), and an event for a topic
 * the cluster does not have. Debian's Chromium opens the console: the overview says delivery is
 * not moving, shows the stalled target with its age and reason, and names the missing topic.
 */
describe('the console shows delivery that does not move', () => {
  let pg: TestPg;
  let dataDir: string;
  let twin: Twin;
  let browser: Browser;
  const missing = randomTopic('msgx-nowhere');

  beforeAll(async () => {
    pg = await freshPg({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'msgx-e2e-stalled-'));
    const hookPort = await freePort(); // nothing listens there: the receiver is down
    twin = await startBareTwin({
      MSGX_PG_URL: pg.url,
      MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
      MSGX_TOPIC_MSG: randomTopic('msgx-msg'),
      MSGX_TOPIC_SCHD: randomTopic('msgx-schd'),
      MSGX_FANOUT_WEBHOOKS: `http://127.0.0.1:${hookPort}/hook`,
      MSGX_DATA_DIR: join(dataDir, '.msgx'),
      MSGX_DELIVERY_POLL_INTERVAL: '200ms',
      MSGX_DELIVERY_INITIAL_BACKOFF: '500ms',
      MSGX_STALE_TARGET_AFTER: '2s',
      MSGX_LOG_LEVEL: 'ERROR',
    });
    browser = await openChromium(join(dataDir, 'chromium'), { width: 1400, height: 1000 });
  }, 90_000);

  afterAll(() => closeConsoleTest({ browser, twin, pg, dataDir }), 60_000);

  it('says delivery is not moving: the stalled target with its age and reason, and the missing topic', async () => {
    await enqueueEvents(pg.db, [
      { target: 'msg', key: 'F1', type: 'FLIGHT_UPDATED', value: { a: 1 } },
      { target: `tx:${missing}`, key: 'k', type: 'TX_MESSAGE', value: 'x' },
    ]);
    const page = browser.page;
    await page.goto(`${twin.base}/console`);
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
    await browser.shot('console-stalled');
  }, 60_000);
});
