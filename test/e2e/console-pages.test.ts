import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { type Browser, openChromium } from '../helpers/chromium.ts';
import { closeConsoleTest } from '../helpers/consoleTeardown.ts';
import { freePort } from '../helpers/freePort.ts';
import { freshPg, type TestPg, waitFor } from '../helpers/services.ts';
import { startBareTwin, type Twin } from '../helpers/twinChild.ts';

/**
 * The console's parts that console.test.ts does not walk through, in Debian's Chromium against
 * the twin (child process, fresh PostgreSQL, file sink) with MSGX_ADMIN_TOKEN set: the sign-in
 * page and the token cookie; the trace form and a trace that does not exist; the processing dead
 * letters with a message that cannot be replayed (MALFORMED), the class filter and the row
 * filter; and the event dead letters — an event whose fan-out webhook refused it (HTTP 400) is
 * DEAD, the operator selects it, replays it through the dry run once the receiver is fixed, and
 * it is sent. No page may throw a script error on the way.
 */
const TOKEN = 'e2e-console-token';

const until = <T>(what: string, fn: () => Promise<T>, timeoutMs = 30_000) => waitFor(fn, { what, timeoutMs, intervalMs: 150 });

describe('console pages in Chromium: sign-in, trace form, dead letters of every kind', () => {
  let pg: TestPg;
  let dataDir: string;
  let twin: Twin;
  let base: string;
  let browser: Browser;
  let page: Page;
  let hook: Server;
  let hookAnswer = 400;
  let malformedId = 0;
  let eventId = 0;

  const admin = async <T>(path: string) => {
    const r = await fetch(base + path, { headers: { authorization: `Bearer ${TOKEN}` } });
    if (!r.ok) throw new Error(`${path}: ${r.status}`);
    return (await r.json()) as T;
  };
  /** Does `action` and waits until the dead-letter table was drawn anew (not the one before it). */
  const redrawn = async (action: () => Promise<unknown>) => {
    await page.evaluate(() => document.querySelector('[data-test=dead-table]')?.setAttribute('data-old', ''));
    await action();
    await page.waitForSelector('[data-test=dead-table]:not([data-old])');
  };
  const shot = (name: string) => browser.shot(`console-pages-${name}`);

  beforeAll(async () => {
    pg = await freshPg({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'msgx-e2e-pages-'));
    const hookPort = await freePort();
    hook = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(hookAnswer).end(hookAnswer === 200 ? 'ok' : 'receiver refuses this event'));
    });
    await new Promise<void>((r) => hook.listen(hookPort, '127.0.0.1', r));
    twin = await startBareTwin({
      MSGX_PG_URL: pg.url,
      MSGX_DATA_DIR: join(dataDir, '.msgx'),
      MSGX_HTTP_HOST: '127.0.0.1',
      MSGX_ADMIN_TOKEN: TOKEN,
      MSGX_FANOUT_WEBHOOKS: `http://127.0.0.1:${hookPort}/hook`,
      MSGX_DELIVERY_MAX_RETRY_COUNT: '1',
      MSGX_DELIVERY_INITIAL_BACKOFF: '200ms',
      MSGX_DELIVERY_POLL_INTERVAL: '200ms',
      MSGX_POLL_INTERVAL_MS: '200',
      MSGX_LOG_LEVEL: 'ERROR',
    });
    base = twin.base;

    // A message no decoder can read: DEAD(MALFORMED), which needs a fixed message, not a replay.
    const sent = await fetch(`${base}/cminmsgs/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/xml' },
      body: '<MSG><META><SNDR>FIMS</SNDR></META></MSG>',
    });
    expect(sent.ok, await sent.clone().text()).toBe(true);
    malformedId = Number(await sent.text());
    await until(
      'the malformed message to be dead',
      async () =>
        (await admin<{ message: { status: string; errorClass: string } }>(`/admin/trace/${malformedId}`)).message.errorClass ===
        'MALFORMED',
    );
    // An event the fan-out webhook refuses (HTTP 400): one attempt, then DEAD.
    [eventId] = (await enqueueEvents(pg.db, [{ target: 'msg', key: 'F9', type: 'FLIGHT_UPDATED', value: { flid: 'F9' } }])) as [number];
    await until(
      'the event to be dead',
      async () =>
        (await pg.db.query<{ status: string }>(`SELECT status FROM msg_event WHERE event_id = $1`, [eventId])).rows[0]?.status === 'DEAD',
    );

    browser = await openChromium(join(dataDir, 'chromium'));
    page = browser.page;
  }, 120_000);

  afterAll(async () => {
    await closeConsoleTest({ browser, twin, pg, dataDir });
    await new Promise((r) => hook?.close(r));
  }, 60_000);

  it('asks for the admin token, and with it loads the console', async () => {
    const first = await page.goto(`${base}/console`);
    expect(first?.status()).toBe(401);
    await page.fill('#t', 'not-the-token');
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    expect(await page.locator('#t').count()).toBe(1); // a wrong token gets the sign-in page again
    await page.fill('#t', TOKEN);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await page.waitForSelector('[data-test=pipeline-state]');
    expect(await page.textContent('[data-test=pipeline-state]')).toBe('Running');
    expect(await page.textContent('[data-test=dead-total] + .sub')).toContain('1 message');
    expect(await page.textContent('[data-test=pipeline-pill]')).toBe('Pipeline running');
  });

  it('opens a trace from the form, and says plainly when the message does not exist', async () => {
    await page.click('a[data-nav=trace]');
    await page.waitForSelector('[data-test=trace-input]');
    await page.fill('[data-test=trace-input]', '987654');
    await page.click('button:has-text("Open trace")');
    await page.waitForFunction(() => document.body.dataset.ready === '/trace/proc/987654');
    expect(page.url()).toMatch(/#\/trace\/proc\/987654$/);
    expect(await page.textContent('[data-test=view] .callout.bad')).toMatch(/Request failed.*no message 987654/);
    expect(await page.inputValue('[data-test=trace-input]')).toBe('987654'); // the form stays, filled in
    await page.fill('[data-test=trace-input]', String(malformedId));
    await page.click('button:has-text("Open trace")');
    await page.waitForSelector('[data-test=trace-title]');
    expect(await page.textContent('[data-test=trace-status]')).toBe('DEAD');
    expect(await page.locator('[data-test=trace-replay]').count()).toBe(0); // MALFORMED is not replayable
  });

  it('lists the malformed message as needing a fix upstream, and filters by class and by text', async () => {
    await redrawn(() => page.click('a[data-nav=dead]'));
    const row = page.locator(`[data-test=dead-table] tr[data-id="${malformedId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('MALFORMED');
    expect(await row.textContent()).toContain('fix upstream');
    expect(await row.locator('input[type=checkbox]').isDisabled()).toBe(true);
    await redrawn(() => page.selectOption('[data-test=class-filter]', 'MALFORMED'));
    expect(page.url()).toMatch(/#\/dead\/proc\?errorClass=MALFORMED$/);
    await row.waitFor();
    expect(await page.locator('[data-test=replay-class]').count()).toBe(0);
    await page.fill('[data-test=dead-search]', 'no row has this text');
    expect(await page.textContent('[data-test=dead-table]')).toContain('No row matches the filter.');
    await page.fill('[data-test=dead-search]', '');
    await row.waitFor();
    await shot('01-dead-proc');
  });

  it('replays the dead event from the events tab once its receiver answers again', async () => {
    await redrawn(() => page.click('[data-test=tab-event]'));
    const row = page.locator(`[data-test=dead-table] tr[data-id="${eventId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toMatch(/FLIGHT_UPDATED.*400/);
    await redrawn(() => page.selectOption('[data-test=target-filter]', 'msg'));
    expect(page.url()).toMatch(/#\/dead\/event\?target=msg$/);
    await row.waitFor();
    expect(await page.locator('button:has-text("Replay all of msg")').count()).toBe(1);

    const bulk = page.locator('[data-test=bulk-action]');
    expect(await bulk.isDisabled()).toBe(true);
    await row.locator('input[type=checkbox]').check();
    expect(await bulk.textContent()).toBe('Replay selected (1)');
    hookAnswer = 200; // the receiver is fixed
    await bulk.click();
    await page.waitForSelector('[data-test=replay-preview]');
    expect(await page.textContent('[data-test=replay-preview]')).toContain(`event ${eventId}`);
    expect(await page.textContent('[data-test=replay-warning]')).toContain('consumers dedupe by msgx-event-id');
    await shot('02-replay-event');
    await page.click('[data-test=replay-confirm]');
    await until(
      'the replayed event to be sent',
      async () =>
        (await pg.db.query<{ status: string }>(`SELECT status FROM msg_event WHERE event_id = $1`, [eventId])).rows[0]?.status === 'SENT',
    );
    await until(
      'the page to have no dead event left',
      async () => (await page.locator(`[data-test=dead-table] tr[data-id="${eventId}"]`).count()) === 0,
    );
    const audit = await pg.db.query<{ actor: string; action: string }>(
      `SELECT actor, action FROM audit_log WHERE action = 'outbox.replay'`,
    );
    expect(audit.rows).toEqual([{ actor: 'console', action: 'outbox.replay' }]);
    expect(browser.pageErrors).toEqual([]);
  });
});
