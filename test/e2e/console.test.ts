import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleTest, startConsoleTest } from '../helpers/consoleTest.ts';
import { fileSink } from '../helpers/fileSink.ts';
import { freePort } from '../helpers/freePort.ts';
import { waitFor } from '../helpers/services.ts';

/**
 * The operations console end to end: the real twin in a child process (`node --import tsx
 * lib/twin/main.ts`) on a fresh PostgreSQL database, with the file sink, and Debian's Chromium
 * driven by playwright-core.
 *
 * The dead letter has to be one that can really succeed after a replay, so it fails for a cause
 * an operator can remove, not for something wrong with the message: while flight 7001's row is
 * unwritable (the test puts a trigger on flight_schd that refuses writes to it, as a database
 * under maintenance would), a FLOP for 7001 fails with a database error. That is an INFRA
 * failure, retriable; with MSGX_MAX_ATTEMPTS=1 it is DEAD(EXHAUSTED) at once. A later FLOP for
 * flight 7002 succeeds meanwhile, so the replay preview carries the order warning (docs/console.md
 * "Pages"). Then the operator "fixes the database" (drops the trigger), replays from the console,
 * and the message succeeds: attempt 2, flight 7001 version 1 → 2, its events sent.
 *
 * The transactional part does the same with a check-back endpoint that answers 503 until it is
 * healed: the message dies unconfirmed, is resent from the console, is confirmed and delivered.
 *
 * Screenshots go to test/artifacts/ (gitignored).
 */

const until = <T>(what: string, fn: () => Promise<T>, timeoutMs = 20_000) => waitFor(fn, { what, timeoutMs, intervalMs: 150 });

const flight = (flid: string) =>
  `<FLIGHT><FLID>${flid}</FLID><OPDY>20261129</OPDY><AWCD>CZ</AWCD><FLNO>${flid}</FLNO><SOBT>20261129101500</SOBT><STAT>SCH</STAT></FLIGHT>`;
const msg = (seqn: number, type: string, styp: string, body: string) =>
  `<MSG><META><SNDR>FIMS</SNDR><RCVR>MSGX</RCVR><SEQN>${seqn}</SEQN><DTTM>20261129083000</DTTM><TYPE>${type}</TYPE><STYP>${styp}</STYP></META>${body}</MSG>`;

describe('console end to end in Chromium against the twin', () => {
  let t: ConsoleTest;
  let checkServer: Server;
  let checkAnswer: 'fail' | 'COMMIT' = 'fail';
  const ids: Record<string, number> = {};
  let txId = '';

  const post = async (path: string, body: string, type = 'application/xml') => {
    const r = await fetch(t.base + path, { method: 'POST', headers: { 'content-type': type }, body });
    if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
    return r.text();
  };
  const admin = async <T>(path: string) => (await (await fetch(t.base + path)).json()) as T;
  const shot = (name: string) => t.browser.shot(`console-${name}`);

  beforeAll(async () => {
    const checkPort = await freePort();
    checkServer = createServer((_req, res) => {
      if (checkAnswer === 'fail') res.writeHead(503).end('producer database down');
      else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: checkAnswer }));
    });
    await new Promise<void>((r) => checkServer.listen(checkPort, '127.0.0.1', r));

    t = await startConsoleTest(
      {
        MSGX_HTTP_HOST: '127.0.0.1',
        MSGX_MAX_ATTEMPTS: '1',
        MSGX_POLL_INTERVAL_MS: '200',
        MSGX_SCHD_FLUSH_PERIOD: '500ms',
        MSGX_DELIVERY_POLL_INTERVAL: '200ms',
        MSGX_TX_CHECK_ALLOWED_ORIGINS: `http://127.0.0.1:${checkPort}`,
        MSGX_TX_CHECK_MAX: '1',
        MSGX_TX_CHECK_INTERVAL: '1s',
        MSGX_LOG_LEVEL: 'WARN',
      },
      { servers: [checkServer] },
    );

    // The day plan: flights 7001 and 7002, version 1.
    ids.plan = Number(
      await post(
        '/cminmsgs/send',
        msg(1, 'SCHD', 'DNLD', `<SCHD><OPDY>20261129</OPDY><CNT>2</CNT>${flight('7001')}${flight('7002')}</SCHD>`),
      ),
    );
    await until(
      'the plan',
      async () => (await admin<{ message: { status: string } }>(`/admin/trace/${ids.plan}`)).message?.status === 'SUCCEEDED',
    );

    // The outage: writes to flight 7001 fail in the database (removed again before the replay).
    await t.pg.db.query(`CREATE FUNCTION e2e_outage() RETURNS trigger LANGUAGE plpgsql AS $$
                       BEGIN RAISE EXCEPTION 'flight store unavailable (maintenance)'; END $$`);
    await t.pg.db.query(`CREATE TRIGGER e2e_outage BEFORE INSERT OR UPDATE ON flight_schd FOR EACH ROW
                       WHEN (NEW.flid = '7001') EXECUTE FUNCTION e2e_outage()`);
    ids.dead = Number(
      await post('/cminmsgs/send', msg(2, 'FLOP', 'ETOT', '<FLOP><FLIGHT><FLID>7001</FLID><ETOT>20261129102000</ETOT></FLIGHT></FLOP>')),
    );
    ids.newer = Number(
      await post('/cminmsgs/send', msg(3, 'FLOP', 'ETOT', '<FLOP><FLIGHT><FLID>7002</FLID><ETOT>20261129103000</ETOT></FLIGHT></FLOP>')),
    );
    await until('the dead letter and the newer success', async () => {
      const [d, n] = await Promise.all([
        admin<{ message: { status: string } }>(`/admin/trace/${ids.dead}`),
        admin<{ message: { status: string } }>(`/admin/trace/${ids.newer}`),
      ]);
      return d.message?.status === 'DEAD' && n.message?.status === 'SUCCEEDED';
    });

    // A transactional message whose producer cannot answer its check-back: DEAD unconfirmed.
    const tx = JSON.parse(
      await post(
        '/v1/tx-messages',
        JSON.stringify({
          topic: 'points',
          key: 'order-42',
          payload: { orderId: 42, points: 120 },
          checkUrl: `http://127.0.0.1:${checkPort}/check`,
          checkAfterMs: 1,
          bizName: 'order-points',
          createdBy: 'orders-svc',
        }),
        'application/json',
      ),
    ) as { id: string };
    txId = tx.id;
    await until(
      'the tx message to die unconfirmed',
      async () => (await admin<{ status: string }>(`/v1/tx-messages/${txId}`)).status === 'DEAD',
    );
  }, 120_000);

  afterAll(() => t?.close(), 60_000);

  it('overview: backlog, head, chart, events per target, dead counts, tx states, pipeline running', async () => {
    await t.page.goto(`${t.base}/console`);
    await t.page.waitForSelector('[data-test=throughput-chart]');
    expect(await t.page.textContent('[data-test=pipeline-state]')).toBe('Running');
    expect(await t.page.textContent('[data-test=backlog]')).toBe('0');
    expect(await t.page.textContent('[data-test=dead-total]')).toBe('2'); // one message, one tx message
    expect(await t.page.textContent('[data-test=dead-classes]')).toContain('EXHAUSTED');
    expect(await t.page.textContent('[data-test=tx-states]')).toContain('DEAD');
    expect(await t.page.textContent('[data-test=throughput-totals]')).toMatch(/^3 finished/);
    // The chart holds what was finished, wherever the minutes fall: summed over its bars (each
    // bar's tooltip counts its minute), the plan and the newer FLOP ok, the dead letter dead.
    const tips = await t.page.$$eval('[data-test=throughput-chart] rect.bar', (rs) => [
      ...new Map(rs.map((r) => [r.getAttribute('x'), r.querySelector('title')?.textContent ?? ''])).values(),
    ]);
    const sum = { finished: 0, ok: 0, skipped: 0, dead: 0 };
    for (const tip of tips) {
      const m = /(\d+) finished \((\d+) ok, (\d+) skipped, (\d+) dead\)/.exec(tip);
      expect(m, tip).not.toBeNull();
      sum.finished += Number(m![1]);
      sum.ok += Number(m![2]);
      sum.skipped += Number(m![3]);
      sum.dead += Number(m![4]);
    }
    expect(sum).toEqual({ finished: 3, ok: 2, skipped: 0, dead: 1 });
    expect(await t.page.locator('[data-test=throughput-chart] rect.bar.dead').count()).toBe(1);
    await shot('01-overview');
  });

  it('finds the dead message, opens its trace, replays it with the dry-run preview, and sees it succeed', async () => {
    await t.page.click('a[data-nav=dead]');
    const row = t.page.locator(`[data-test=dead-table] tr[data-id="${ids.dead}"]`);
    await row.waitFor();
    const text = await row.textContent();
    expect(text).toContain('EXHAUSTED');
    expect(text).toMatch(/INFRA: .*flight store unavailable \(maintenance\)/);
    await shot('02-dead-letters');

    await row.locator('[data-test=trace-link]').click();
    await t.page.waitForSelector('[data-test=trace-title]');
    expect(await t.page.textContent('[data-test=trace-title]')).toContain(`Message #${ids.dead}`);
    expect(await t.page.textContent('[data-test=trace-status]')).toBe('DEAD');
    expect(await t.page.textContent('[data-test=attempts]')).toContain('EXHAUSTED');
    expect(await t.page.textContent('[data-test=flight-changes]')).toContain('No flight changed');
    await shot('03-trace-dead');

    // The operator fixes the cause, then replays from the trace t.page.
    await t.pg.db.query(`DROP TRIGGER e2e_outage ON flight_schd`);
    await t.page.click('[data-test=trace-replay]');
    await t.page.waitForSelector('[data-test=replay-preview]');
    expect(await t.page.textContent('[data-test=replay-preview]')).toContain(`#${ids.dead}`);
    expect(await t.page.textContent('[data-test=replay-warning]')).toMatch(
      /1 newer message\(s\) already succeeded after #\d+: replaying may overwrite newer flight state/,
    );
    await shot('04-replay-preview');
    // The dry run changed nothing.
    expect((await admin<{ message: { status: string } }>(`/admin/trace/${ids.dead}`)).message.status).toBe('DEAD');

    await t.page.click('[data-test=replay-confirm]');
    await t.page.waitForSelector('dialog[open]', { state: 'detached' }).catch(() => {});
    // Refresh the trace until the pump has processed it again and the relay has sent its events.
    await until('the replayed message to succeed with its events sent', async () => {
      await t.page.click('button:has-text("Refresh")');
      await t.page.waitForSelector('[data-test=trace-status]');
      const status = await t.page.textContent('[data-test=trace-status]');
      const events = await t.page.textContent('[data-test=events]');
      const backfill = await t.page.textContent('[data-test=backfill-state]');
      return status === 'SUCCEEDED' && (events?.match(/SENT/g) ?? []).length >= 2 && backfill === 'done';
    });
    const attempts = await t.page.locator('[data-test=attempts] tbody tr').allTextContents();
    expect(attempts).toHaveLength(2);
    expect(attempts[0]).toContain('DEAD');
    expect(attempts[1]).toContain('SUCCEEDED');
    const changes = await t.page.textContent('[data-test=flight-changes]');
    expect(changes).toContain('7001');
    expect(changes).toContain('1 → 2');
    expect(changes).toContain('ETOT');
    expect(await t.page.textContent('[data-test=timeline]')).toContain('replay');
    await shot('05-trace-succeeded');

    // The state and the audit trail agree with the t.page.
    const f = await admin<{ ETOT: string; stateVersion: number }>('/v1/flights/7001');
    expect(f).toMatchObject({ ETOT: '20261129102000', stateVersion: 2 });
    const audit = await t.pg.db.query<{ actor: string; action: string }>(
      `SELECT actor, action FROM audit_log WHERE action LIKE 'replay.proc%' ORDER BY id`,
    );
    expect(audit.rows).toEqual([
      { actor: 'console', action: 'replay.proc.dry-run' },
      { actor: 'console', action: 'replay.proc' },
    ]);
  });

  it('resends a dead transactional message and follows it from prepare to delivery in the same trace view', async () => {
    await t.page.goto(`${t.base}/console#/dead/txmsg`);
    const row = t.page.locator(`[data-test=dead-table] tr[data-id="${txId}"]`);
    await row.waitFor();
    // rtm's message fields (docs/txmsg.md "API"): the business and the creator in the dead list and the trace.
    expect(await row.textContent()).toContain('order-points');
    expect(await row.textContent()).toContain('orders-svc');
    await row.locator('[data-test=trace-link]').click();
    await t.page.waitForSelector('[data-test=trace-title]');
    expect(await t.page.textContent('[data-test=trace-status]')).toBe('DEAD');
    expect([await t.page.textContent('[data-test=tx-biz]'), await t.page.textContent('[data-test=tx-created-by]')]).toEqual([
      'order-points',
      'orders-svc',
    ]);
    expect(await t.page.locator('[data-test=tx-resent]').count()).toBe(0);
    expect(await t.page.textContent('[data-test=timeline]')).toContain('check');

    checkAnswer = 'COMMIT'; // the producer is back and says its local transaction committed
    await t.page.click('[data-test=trace-resend]');
    await t.page.click('[data-test=resend-confirm]');
    await until('the resent message to be confirmed and delivered', async () => {
      await t.page.click('button:has-text("Refresh")');
      await t.page.waitForSelector('[data-test=trace-status]');
      const status = await t.page.textContent('[data-test=trace-status]');
      return status === 'DELIVERED' && (await t.page.textContent('[data-test=events]'))?.includes('SENT');
    });
    const tl = await t.page.textContent('[data-test=timeline]');
    for (const k of ['prepare', 'check', 'dead', 'resend', 'commit', 'enqueue', 'sent']) expect(tl).toContain(k);
    expect(await t.page.textContent('[data-test=tx-resent]')).toMatch(/^by console /);
    await shot('06-tx-trace');
    // Delivered for real, as the consumer sees it: one record of it in the file sink, the
    // producer's key and payload, named by its id (read after the trace showed it SENT).
    expect(fileSink(join(t.dataDir, '.msgx'), 'points').map((r) => [r.key, JSON.parse(r.value), r.headers['msgx-txmsg-id']])).toEqual([
      ['order-42', { orderId: 42, points: 120 }, txId],
    ]);
    expect(await admin(`/v1/tx-messages/${txId}`)).toMatchObject({ status: 'DELIVERED' });
    const audit = await t.pg.db.query<{ actor: string }>(`SELECT actor FROM audit_log WHERE action = 'txmsg.resend'`);
    expect(audit.rows).toEqual([{ actor: 'console' }]);
  });

  it('pauses and resumes the pipeline from the overview', async () => {
    await t.page.goto(`${t.base}/console#/overview`);
    await t.page.waitForSelector('[data-test=pause-toggle]');
    await t.page.click('[data-test=pause-toggle]');
    await t.page.click('[data-test=pause-confirm]');
    await until('paused', async () => (await t.page.textContent('[data-test=pipeline-state]')) === 'Paused');
    expect(await t.page.textContent('[data-test=pipeline-pill]')).toBe('Pipeline paused');
    await shot('07-paused');
    // Paused for real, judged outside the console: a FLOP sent now is taken in and waits at the
    // head, the flight unchanged, until the resume.
    const before = await admin<{ stateVersion: number }>('/v1/flights/7002');
    const waiting = Number(
      await post('/cminmsgs/send', msg(90, 'FLOP', 'ETOT', '<FLOP><FLIGHT><FLID>7002</FLID><ETOT>20261129111100</ETOT></FLIGHT></FLOP>')),
    );
    await until('the FLOP to wait at the head', async () => {
      const st = await admin<{ paused: boolean; pipeline: { backlog: number; head: { msgId: number } | null } }>('/admin/stats');
      return st.paused && st.pipeline.backlog === 1 && st.pipeline.head?.msgId === waiting;
    });
    expect(await admin('/health')).toMatchObject({ status: 'ok', pipeline: 'paused' });
    expect(await admin('/v1/flights/7002')).toMatchObject({ stateVersion: before.stateVersion });
    await t.page.click('[data-test=pause-toggle]');
    await t.page.click('[data-test=pause-confirm]');
    await until('running', async () => (await t.page.textContent('[data-test=pipeline-state]')) === 'Running');
    await until(
      'the waiting FLOP applied after the resume',
      async () => (await admin<{ ETOT: string; stateVersion: number }>('/v1/flights/7002')).stateVersion === before.stateVersion + 1,
    );
    expect(await admin('/v1/flights/7002')).toMatchObject({ ETOT: '20261129111100', stateVersion: before.stateVersion + 1 });
    const audit = await t.pg.db.query<{ actor: string; action: string }>(
      `SELECT actor, action FROM audit_log WHERE action LIKE 'pipeline.%' ORDER BY id`,
    );
    expect(audit.rows).toEqual([
      { actor: 'console', action: 'pipeline.pause' },
      { actor: 'console', action: 'pipeline.resume' },
    ]);
    expect(t.browser.pageErrors).toEqual([]);
  });
});
