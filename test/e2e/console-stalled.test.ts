import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { type ConsoleTest, startConsoleTest } from '../helpers/consoleTest.ts';
import { freePort } from '../helpers/freePort.ts';
import { randomTopic } from '../helpers/kafka.ts';
import { serviceUrls } from '../helpers/services.ts';

/**
 * Issue 13 as an operator sees it: the twin (child process) on PostgreSQL and the real broker,
 * with a fan-out webhook whose receiver is down (connection refused), and an event for a topic
 * the cluster does not have. Debian's Chromium opens the console: the overview says delivery is
 * not moving, shows the stalled target with its age and reason, and names the missing topic.
 */
describe('the console shows delivery that does not move', () => {
  let t: ConsoleTest;
  const missing = randomTopic('msgx-nowhere');

  beforeAll(async () => {
    const hookPort = await freePort(); // nothing listens there: the receiver is down
    t = await startConsoleTest(
      {
        MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
        MSGX_TOPIC_MSG: randomTopic('msgx-msg'),
        MSGX_TOPIC_SCHD: randomTopic('msgx-schd'),
        MSGX_FANOUT_WEBHOOKS: `http://127.0.0.1:${hookPort}/hook`,
        MSGX_DELIVERY_POLL_INTERVAL: '200ms',
        MSGX_DELIVERY_INITIAL_BACKOFF: '500ms',
        MSGX_STALE_TARGET_AFTER: '2s',
        MSGX_LOG_LEVEL: 'ERROR',
      },
      { viewport: { width: 1400, height: 1000 } },
    );
  }, 90_000);

  afterAll(() => t?.close(), 60_000);

  it('says delivery is not moving: the stalled target with its age and reason, and the missing topic', async () => {
    await enqueueEvents(t.pg.db, [
      { target: 'msg', key: 'F1', type: 'FLIGHT_UPDATED', value: { a: 1 } },
      { target: `tx:${missing}`, key: 'k', type: 'TX_MESSAGE', value: 'x' },
    ]);
    const page = t.page;
    await page.goto(`${t.base}/console`);
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
    await t.browser.shot('console-stalled');
  }, 60_000);
});
