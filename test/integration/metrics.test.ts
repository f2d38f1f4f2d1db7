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
    await enqueueMessages(pg.db, [{ id: 10, receivedAt: t0 }, { id: 11, receivedAt: t0 }], t0);
    await pg.db.query(`INSERT INTO proc_state (msg_id, status, error_class, next_attempt_at, enqueued_at, updated_at, finished_at)
                       VALUES (5, 'DEAD', 'PROTOCOL', $1, $1, $1, $2)`, [t0, new Date(now.getTime() - 10_000)]);
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
});
