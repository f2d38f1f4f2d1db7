import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { type ConsoleTest, startConsoleTest } from '../helpers/consoleTest.ts';
import { freePort } from '../helpers/freePort.ts';
import { waitFor } from '../helpers/services.ts';

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
  let t: ConsoleTest;
  let hook: Server;
  let hookAnswer = 400;
  let malformedId = 0;
  let eventId = 0;

  const admin = async <T>(path: string) => {
    const r = await fetch(t.base + path, { headers: { authorization: `Bearer ${TOKEN}` } });
    if (!r.ok) throw new Error(`${path}: ${r.status}`);
    return (await r.json()) as T;
  };
  /** Does `action` and waits until the dead-letter table was drawn anew (not the one before it). */
  const redrawn = async (action: () => Promise<unknown>) => {
    await t.page.evaluate(() => document.querySelector('[data-test=dead-table]')?.setAttribute('data-old', ''));
    await action();
    await t.page.waitForSelector('[data-test=dead-table]:not([data-old])');
  };
  const shot = (name: string) => t.browser.shot(`console-pages-${name}`);

  beforeAll(async () => {
    const hookPort = await freePort();
    hook = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(hookAnswer).end(hookAnswer === 200 ? 'ok' : 'receiver refuses this event'));
    });
    await new Promise<void>((r) => hook.listen(hookPort, '127.0.0.1', r));
    t = await startConsoleTest(
      {
        MSGX_HTTP_HOST: '127.0.0.1',
        MSGX_ADMIN_TOKEN: TOKEN,
        MSGX_FANOUT_WEBHOOKS: `http://127.0.0.1:${hookPort}/hook`,
        MSGX_DELIVERY_MAX_RETRY_COUNT: '1',
        MSGX_DELIVERY_INITIAL_BACKOFF: '200ms',
        MSGX_DELIVERY_POLL_INTERVAL: '200ms',
        MSGX_POLL_INTERVAL_MS: '200',
        MSGX_LOG_LEVEL: 'ERROR',
      },
      { servers: [hook] },
    );

    // A message no decoder can read: DEAD(MALFORMED), which needs a fixed message, not a replay.
    const sent = await fetch(`${t.base}/cminmsgs/send`, {
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
    [eventId] = (await enqueueEvents(t.pg.db, [{ target: 'msg', key: 'F9', type: 'FLIGHT_UPDATED', value: { flid: 'F9' } }])) as [number];
    await until(
      'the event to be dead',
      async () =>
        (
          await t.pg.db.query<{ status: string }>(
            `SELECT msgx_event_state(status, target, event_id, writer_xid, now()) AS status FROM msg_event WHERE event_id = $1`,
            [eventId],
          )
        ).rows[0]?.status === 'DEAD',
    );
  }, 120_000);

  afterAll(() => t?.close(), 60_000);

  it('asks for the admin token, and with it loads the console', async () => {
    const first = await t.page.goto(`${t.base}/console`);
    expect(first?.status()).toBe(401);
    await t.page.fill('#t', 'not-the-token');
    await Promise.all([t.page.waitForNavigation(), t.page.click('button[type=submit]')]);
    expect(await t.page.locator('#t').count()).toBe(1); // a wrong token gets the sign-in page again
    await t.page.fill('#t', TOKEN);
    await Promise.all([t.page.waitForNavigation(), t.page.click('button[type=submit]')]);
    await t.page.waitForSelector('[data-test=pipeline-state]');
    expect(await t.page.textContent('[data-test=pipeline-state]')).toBe('Running');
    expect(await t.page.textContent('[data-test=dead-total] + .sub')).toContain('1 message');
    expect(await t.page.textContent('[data-test=pipeline-pill]')).toBe('Pipeline running');
  });

  it('opens a trace from the form, and says plainly when the message does not exist', async () => {
    await t.page.click('a[data-nav=trace]');
    await t.page.waitForSelector('[data-test=trace-input]');
    await t.page.fill('[data-test=trace-input]', '987654');
    await t.page.click('button:has-text("Open trace")');
    await t.page.waitForFunction(() => document.body.dataset.ready === '/trace/proc/987654');
    expect(t.page.url()).toMatch(/#\/trace\/proc\/987654$/);
    expect(await t.page.textContent('[data-test=view] .callout.bad')).toMatch(/Request failed.*no message 987654/);
    expect(await t.page.inputValue('[data-test=trace-input]')).toBe('987654'); // the form stays, filled in
    await t.page.fill('[data-test=trace-input]', String(malformedId));
    await t.page.click('button:has-text("Open trace")');
    await t.page.waitForSelector('[data-test=trace-title]');
    expect(await t.page.textContent('[data-test=trace-status]')).toBe('DEAD');
    expect(await t.page.locator('[data-test=trace-replay]').count()).toBe(0); // MALFORMED is not replayable
  });

  it('lists the malformed message as needing a fix upstream, and filters by class and by text', async () => {
    await redrawn(() => t.page.click('a[data-nav=dead]'));
    const row = t.page.locator(`[data-test=dead-table] tr[data-id="${malformedId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('MALFORMED');
    expect(await row.textContent()).toContain('fix upstream');
    expect(await row.locator('input[type=checkbox]').isDisabled()).toBe(true);
    await redrawn(() => t.page.selectOption('[data-test=class-filter]', 'MALFORMED'));
    expect(t.page.url()).toMatch(/#\/dead\/proc\?errorClass=MALFORMED$/);
    await row.waitFor();
    expect(await t.page.locator('[data-test=replay-class]').count()).toBe(0);
    await t.page.fill('[data-test=dead-search]', 'no row has this text');
    expect(await t.page.textContent('[data-test=dead-table]')).toContain('No row matches the filter.');
    await t.page.fill('[data-test=dead-search]', '');
    await row.waitFor();
    await shot('01-dead-proc');
  });

  it('replays the dead event from the events tab once its receiver answers again', async () => {
    await redrawn(() => t.page.click('[data-test=tab-event]'));
    const row = t.page.locator(`[data-test=dead-table] tr[data-id="${eventId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toMatch(/FLIGHT_UPDATED.*400/);
    await redrawn(() => t.page.selectOption('[data-test=target-filter]', 'msg'));
    expect(t.page.url()).toMatch(/#\/dead\/event\?target=msg$/);
    await row.waitFor();
    expect(await t.page.locator('button:has-text("Replay all of msg")').count()).toBe(1);

    const bulk = t.page.locator('[data-test=bulk-action]');
    expect(await bulk.isDisabled()).toBe(true);
    await row.locator('input[type=checkbox]').check();
    expect(await bulk.textContent()).toBe('Replay selected (1)');
    hookAnswer = 200; // the receiver is fixed
    await bulk.click();
    await t.page.waitForSelector('[data-test=replay-preview]');
    expect(await t.page.textContent('[data-test=replay-preview]')).toContain(`event ${eventId}`);
    expect(await t.page.textContent('[data-test=replay-warning]')).toContain('consumers dedupe by msgx-event-id');
    await shot('02-replay-event');
    await t.page.click('[data-test=replay-confirm]');
    await until(
      'the replayed event to be sent',
      async () =>
        (
          await t.pg.db.query<{ status: string }>(
            `SELECT msgx_event_state(status, target, event_id, writer_xid, now()) AS status FROM msg_event WHERE event_id = $1`,
            [eventId],
          )
        ).rows[0]?.status === 'SENT',
    );
    await until(
      'the page to have no dead event left',
      async () => (await t.page.locator(`[data-test=dead-table] tr[data-id="${eventId}"]`).count()) === 0,
    );
    const audit = await t.pg.db.query<{ actor: string; action: string }>(
      `SELECT actor, action FROM audit_log WHERE action = 'outbox.replay'`,
    );
    expect(audit.rows).toEqual([{ actor: 'console', action: 'outbox.replay' }]);
    expect(t.browser.pageErrors).toEqual([]);
  });
});
