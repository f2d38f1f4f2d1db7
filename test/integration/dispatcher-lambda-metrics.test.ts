import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { BUDGET_MARGIN_MS } from '../../lib/jobs/coldStart.ts';
import { enqueueEvents } from '../../lib/outbox/enqueue.ts';
import { ensureTopics } from '../../lib/outbox/topics.ts';
import { readTopicToEnd } from '../helpers/kafka.ts';
import { asLambdaFunction, type LambdaFunction } from '../helpers/lambdaEnv.ts';
import { serviceUrls, type TestPg } from '../helpers/services.ts';
import { lambdaRole } from '../helpers/lambdaRoles.ts';

/**
 * The dispatcher's Lambda handler (test/helpers/lambdaRoles.ts: its catalogue entry, as deployed)
 * invoked as Lambda invokes it (an EventBridge event and a context with getRemainingTimeInMillis),
 * against real PostgreSQL and Kafka. Its EMF records on stdout are
 * counted against what really reached the topic (read back with a Kafka consumer), and every
 * invocation, an idle one included, emits the gauge the OldestPendingEvent alarm watches.
 */
type Emf = Record<string, unknown> & {
  _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[] };
};

describe('the dispatcher Lambda flushes its metrics in every invocation', () => {
  let fn: LambdaFunction;
  let pg: TestPg;
  const { kafkaBrokers } = serviceUrls();

  beforeAll(async () => {
    fn = await asLambdaFunction({ MSGX_DELIVERY_POLL_INTERVAL: '100ms' });
    pg = fn.pg;
    await ensureTopics(loadConfig(process.env));
  });
  afterAll(() => fn?.end());

  /** One invocation with `remainingMs` on the clock; returns the EMF documents it printed. */
  async function invoke(remainingMs: number): Promise<Emf[]> {
    const handler = await lambdaRole('dispatcher');
    const out: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out.push(String(chunk));
      return true;
    });
    try {
      await handler({ source: 'aws.scheduler' }, { getRemainingTimeInMillis: () => remainingMs });
    } finally {
      spy.mockRestore();
    }
    return out
      .join('')
      .split('\n')
      .filter((l) => l.includes('"_aws"'))
      .map((l) => JSON.parse(l) as Emf);
  }
  const sum = (docs: Emf[], name: string, dims: Record<string, string> = {}) =>
    docs.filter((d) => name in d && Object.entries(dims).every(([k, v]) => d[k] === v)).reduce((n, d) => n + Number(d[name]), 0);
  /** The documents that carry `name` with exactly the dimension set the monitoring stack's alarm selects. */
  const alarmable = (docs: Emf[], name: string, dims: string[]) =>
    docs.filter((d) =>
      d._aws.CloudWatchMetrics.some(
        (m) => m.Namespace === 'msgx' && m.Metrics.some((x) => x.Name === name) && JSON.stringify(m.Dimensions) === JSON.stringify([dims]),
      ),
    );

  it('counts what it sent in the invocation that sent it, and reports the backlog gauge at start and end', async () => {
    const n = 37;
    await enqueueEvents(
      pg.db,
      Array.from({ length: n }, (_, i) => ({ target: 'msg', key: `F${i % 4}`, type: 'T', value: { i } })),
    );

    const docs = await invoke(BUDGET_MARGIN_MS + 4_000); // a 4 s loop: enough for 37 events
    const onTopic = await readTopicToEnd(kafkaBrokers, fn.env.MSGX_TOPIC_MSG!); // every record, to the end of every partition
    expect(onTopic).toHaveLength(n);
    expect(sum(docs, 'EventsSent')).toBe(n);
    expect(sum(docs, 'DeadCount', { kind: 'event' })).toBe(0);
    const oldest = alarmable(docs, 'OldestPendingEventSeconds', ['service']);
    expect(oldest.length).toBeGreaterThanOrEqual(2); // at the start (37 waiting) and before returning
    expect(Number(oldest.at(-1)!.OldestPendingEventSeconds)).toBe(0);
    expect(Number(oldest.at(-1)!.OutboxBacklog)).toBe(0);
    expect(Number(oldest[0]!.OutboxBacklog)).toBe(n);
  });

  it('an idle invocation (no budget, nothing to send) still emits zeros and the gauges', async () => {
    const docs = await invoke(BUDGET_MARGIN_MS); // remaining time = the margin: the loop does not even run
    expect(sum(docs, 'EventsSent')).toBe(0);
    const oldest = alarmable(docs, 'OldestPendingEventSeconds', ['service']);
    expect(oldest.length).toBeGreaterThanOrEqual(1);
    expect(oldest.every((d) => Number(d.OldestPendingEventSeconds) === 0)).toBe(true);
    expect(alarmable(docs, 'DeadCount', ['service', 'kind'])).not.toHaveLength(0);
  });

  it('a stuck head shows as an old pending event in the same invocation', async () => {
    const [id] = await enqueueEvents(pg.db, [{ target: 'msg', key: 'k', type: 'T', value: 1 }], { now: new Date(Date.now() - 120_000) });
    // Held back (a failed head backing off for an hour: its exception, the target's hold), so this
    // invocation cannot deliver it.
    await pg.db.query(
      `WITH t AS (INSERT INTO outbox_target (target, snap_lo, hold_until) VALUES ('msg', msgx_outbox_origin(), now() + interval '1 hour')
                  ON CONFLICT (target) DO UPDATE SET hold_until = EXCLUDED.hold_until)
       INSERT INTO outbox_exception (target, event_id, attempts, next_attempt_at, partition_key, at_head)
       VALUES ('msg', $1, 3, now() + interval '1 hour', 'k', true)`,
      [id],
    );
    const docs = await invoke(BUDGET_MARGIN_MS + 1_000);
    const oldest = alarmable(docs, 'OldestPendingEventSeconds', ['service']);
    expect(Number(oldest.at(-1)!.OldestPendingEventSeconds)).toBeGreaterThanOrEqual(120);
    await pg.db.query(`DELETE FROM msg_event WHERE event_id = $1`, [id]);
    await pg.db.query(`DELETE FROM outbox_exception WHERE event_id = $1`, [id]);
    await pg.db.query(`UPDATE outbox_target SET hold_until = NULL WHERE target = 'msg'`);
  });
});
