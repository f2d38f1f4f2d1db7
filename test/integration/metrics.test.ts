import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { enqueueMessages } from '../../lib/pipeline/procState.ts';
import { readGauges } from '../../lib/observability/metrics.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/** The gauges behind the CloudWatch alarms, read from real tables. */
describe('alarm gauges', () => {
  let pg: TestPg;
  beforeAll(async () => {
    pg = await freshPg();
  });
  afterAll(() => pg.drop());

  it('reports head age, backlog, recent deaths per kind and the oldest pending event', async () => {
    const t0 = new Date('2026-11-29T00:00:00Z');
    const now = new Date('2026-11-29T00:05:00Z');
    await enqueueMessages(
      pg.db,
      [
        { id: 10, receivedAt: t0 },
        { id: 11, receivedAt: t0 },
      ],
      t0,
    );
    await pg.db.query(
      `INSERT INTO proc_state (msg_id, status, error_class, next_attempt_at, enqueued_at, updated_at, finished_at)
                       VALUES (5, 'DEAD', 'PROTOCOL', $1, $1, $1, $2)`,
      [t0, new Date(now.getTime() - 10_000)],
    );
    await enqueueEvents(pg.db, [{ target: 'msg', type: 'T', value: { a: 1 } }], { now: new Date('2026-11-29T00:04:00Z') });

    const g = await readGauges(pg.db, now, 60_000);
    expect(g).toEqual({
      headAgeSeconds: 300,
      backlog: 2,
      deadInWindow: { proc: 1, event: 0, txmsg: 0 },
      oldestPendingEventSeconds: 60,
      backfillFailures: 0,
      mailboxHoles: 0,
      lateRows: 0,
    });
  });

  it('counts each kind from its own table: dead events and transactional messages in the window, failing back-fills, holes, late rows', async () => {
    const now = new Date('2026-11-29T01:00:00Z');
    const inWindow = new Date(now.getTime() - 5_000);
    const before = new Date(now.getTime() - 120_000);
    await enqueueEvents(
      pg.db,
      [
        { target: 'msg', type: 'T', value: { a: 2 } },
        { target: 'msg', type: 'T', value: { a: 3 } },
      ],
      { now: before },
    );
    // One event died in the window, one before it; no event is left open.
    await pg.db.query(
      `UPDATE msg_event SET status = 'DEAD', dead_at = CASE WHEN event_id = (SELECT max(event_id) FROM msg_event) THEN $1::timestamptz ELSE $2::timestamptz END`,
      [inWindow, before],
    );
    await pg.db.query(
      `INSERT INTO tx_message (id, topic, payload, check_url, check_after_ms, check_timeout_ms, status, created_at, updated_at) VALUES
        ('tx-1', 't', 'p', 'http://x', 1000, 1000, 'DEAD', $1, $2), ('tx-2', 't', 'p', 'http://x', 1000, 1000, 'DEAD', $1, $1),
        ('tx-3', 't', 'p', 'http://x', 1000, 1000, 'COMMITTED', $1, $2)`,
      [before, inWindow],
    );
    await pg.db.query(
      `INSERT INTO backfill_todo (msg_id, proc_status, processed_at, attempts, next_attempt_at) VALUES
        (10, 'SUCCEEDED', $1, 2, $1), (11, 'SUCCEEDED', $1, 0, $1)`,
      [before],
    );
    await pg.db.query(
      `INSERT INTO msgx_state (key, value, updated_at) VALUES ('mailbox.counters', '{"holes": 3}', $1)
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
      [before],
    );
    await pg.db.query(`INSERT INTO mailbox_late (msg_id, found_at, via) VALUES (7, $1, 'poller'), (8, $1, 'rescan')`, [before]);

    const g = await readGauges(pg.db, now, 60_000);
    expect(g.deadInWindow).toEqual({ proc: 0, event: 1, txmsg: 1 });
    expect(g.oldestPendingEventSeconds).toBe(0);
    expect(g.backfillFailures).toBe(1);
    expect(g.mailboxHoles).toBe(3);
    expect(g.lateRows).toBe(2);
  });
});
