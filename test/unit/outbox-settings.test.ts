import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { buildPublishers } from '../../lib/outbox/publishers/build.ts';
import { FileSinkPublisher } from '../../lib/outbox/publishers/file.ts';
import { ENFORCED_PRODUCER, KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { WebhookPublisher } from '../../lib/outbox/publishers/webhook.ts';
import { backoffMs, deliverySettingsFor } from '../../lib/outbox/settings.ts';
import { topicForTarget } from '../../lib/outbox/dispatcher.ts';
import { FakeClock } from '../../lib/shared/clock.ts';

describe('delivery settings', () => {
  test('defaults as docs/outbox.md "Settings" lists them: 100 per batch, 3 s deadline, 10 attempts, 5 s doubling to 5 min', () => {
    const c = loadConfig({});
    expect(deliverySettingsFor(c.outbox, 'msg')).toEqual({
      batchSize: 100,
      publishTimeoutMs: 3000,
      maxRetryCount: 10,
      initialBackoffMs: 5000,
      maxBackoffMs: 300_000,
      retryStrategy: 'exponential_backoff',
    });
    expect(c.outbox.pollIntervalMs).toBe(1000);
    const waits = Array.from({ length: 10 }, (_, i) => backoffMs(deliverySettingsFor(c.outbox, 'msg'), i + 1) / 1000);
    expect(waits).toEqual([5, 10, 20, 40, 80, 160, 300, 300, 300, 300]);
  });

  test('per-target overrides apply to their target only', () => {
    const c = loadConfig({ MSGX_DELIVERY_TARGET_OVERRIDES: '{"tx:orders":{"maxRetryCount":3,"initialBackoff":"1s","batchSize":10}}' });
    expect(deliverySettingsFor(c.outbox, 'tx:orders')).toMatchObject({
      maxRetryCount: 3,
      initialBackoffMs: 1000,
      batchSize: 10,
      maxBackoffMs: 300_000,
    });
    expect(deliverySettingsFor(c.outbox, 'msg').maxRetryCount).toBe(10);
  });

  test.each([
    [{ MSGX_DELIVERY_BATCH_SIZE: '0' }, /MSGX_DELIVERY_BATCH_SIZE/],
    [{ MSGX_DELIVERY_MAX_RETRY_COUNT: '-1' }, /MSGX_DELIVERY_MAX_RETRY_COUNT/],
    [{ MSGX_DELIVERY_INITIAL_BACKOFF: '10m' }, /MSGX_DELIVERY_INITIAL_BACKOFF: must not exceed MSGX_DELIVERY_MAX_BACKOFF/],
    [{ MSGX_DELIVERY_PUBLISH_TIMEOUT: '1m' }, /MSGX_DELIVERY_LEASE/],
    [{ MSGX_DELIVERY_RETRY_STRATEGY: 'linear' }, /MSGX_DELIVERY_RETRY_STRATEGY/],
    [{ MSGX_DELIVERY_POLL_INTERVAL: 'soon' }, /MSGX_DELIVERY_POLL_INTERVAL/],
    [{ MSGX_DELIVERY_TARGET_OVERRIDES: '{oops' }, /MSGX_DELIVERY_TARGET_OVERRIDES: must be JSON/],
    [{ MSGX_DELIVERY_TARGET_OVERRIDES: '{"msg":{"batchSize":0}}' }, /MSGX_DELIVERY_TARGET_OVERRIDES: msg.batchSize/],
    [{ MSGX_DELIVERY_TARGET_OVERRIDES: '{"msg":{"acks":0}}' }, /MSGX_DELIVERY_TARGET_OVERRIDES/],
    [
      { MSGX_DELIVERY_TARGET_OVERRIDES: '{"msg":{"initialBackoff":"10m"}}' },
      /MSGX_DELIVERY_TARGET_OVERRIDES.msg.initialBackoff: must not exceed maxBackoff/,
    ],
    [{ MSGX_DELIVERY_TARGET_OVERRIDES: '{"msg":{"publishTimeout":"1m"}}' }, /MSGX_DELIVERY_TARGET_OVERRIDES.msg.publishTimeout/],
  ])('refuses %j naming the setting', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });
});

describe('publishers', () => {
  test('the producer safety settings are constants, not configuration', () => {
    expect(ENFORCED_PRODUCER).toEqual({ idempotent: true, maxInFlightRequests: 1, acks: -1 });
    expect(Object.isFrozen(ENFORCED_PRODUCER)).toBe(true);
  });

  test('buildPublishers: the file sink without brokers, Kafka with them, plus one webhook per fan-out URL', async () => {
    const file = buildPublishers(loadConfig({ MSGX_FANOUT_WEBHOOKS: 'http://a.test/h,https://b.test/x' }));
    expect(file.map((p) => p.constructor)).toEqual([FileSinkPublisher, WebhookPublisher, WebhookPublisher]);
    expect(file.map((p) => p.name)).toEqual(['file', 'webhook:http://a.test/h', 'webhook:https://b.test/x']);
    const kafka = buildPublishers(loadConfig({ MSGX_KAFKA_BROKERS: '127.0.0.1:9' }));
    expect(kafka[0]).toBeInstanceOf(KafkaPublisher);
    await Promise.all([...file, ...kafka].map((p) => p.close()));
  });

  test('targets map to topics; shadow mode suffixes transactional topics too', () => {
    const c = loadConfig({ MSGX_SHADOW: '1' });
    expect(topicForTarget(c, 'msg')).toBe('msgx.msg.shadow');
    expect(topicForTarget(c, 'schd')).toBe('msgx.schd.shadow');
    expect(topicForTarget(c, 'tx:orders')).toBe('orders.shadow');
    expect(topicForTarget(c, 'nope')).toBeNull();
  });

  test('the file sink appends one JSON line per record, null for a tombstone', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'msgx-sink-'));
    const clock = new FakeClock('2026-11-29T08:00:00Z');
    const sink = new FileSinkPublisher({ dir, clock });
    const rec = (eventId: number, value: string | null) => ({
      eventId,
      target: 'schd',
      topic: 'msgx.schd',
      key: 'F1',
      value,
      type: value === null ? 'TOMBSTONE' : 'UPSERT',
      headers: { 'msgx-event-id': String(eventId), 'msgx-event-type': 'UPSERT' },
    });
    const ac = new AbortController();
    expect(await sink.publish([rec(1, '{"FLID":"F1"}'), rec(2, null)], ac.signal)).toEqual([{ ok: true }, { ok: true }]);
    await sink.publish([rec(3, '{}')], ac.signal);
    const lines = (await readFile(join(dir, 'msgx.schd.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(3);
    expect(lines[0]).toEqual({
      topic: 'msgx.schd',
      key: 'F1',
      value: '{"FLID":"F1"}',
      headers: rec(1, '').headers,
      at: '2026-11-29T08:00:00.000Z',
    });
    expect(lines[1].value).toBeNull();
  });
});

describe('EMF metrics', () => {
  test('nothing is held back: each flush emits what was recorded since the last one, zeros included', async () => {
    const { createEmfMetrics } = await import('../../lib/outbox/metrics.ts');
    const { vi } = await import('vitest');
    const lines: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    const docs = () =>
      lines
        .join('')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    try {
      const m = createEmfMetrics();
      const round = (sent: number, dead: number) => ({
        targets: [] as never,
        sent,
        retried: 1,
        dead,
        more: false,
        discoverMs: 0,
        totalMs: 0,
      });
      m.recordRound(round(5, 0));
      m.recordRound(round(3, 1));
      expect(lines).toEqual([]); // recording prints nothing; the invocation's flush does
      m.recordGauges({
        oldestPendingEventSeconds: 7,
        openEvents: 4,
        stalledTargets: 1,
        byTarget: [{ target: 'msg', oldestPendingEventSeconds: 7 }],
      });
      m.flush();
      let d = docs();
      const find = (name: string, dim?: string) => d.find((x) => name in x && (dim ? dim in x : !('target' in x)));
      expect(find('EventsSent')).toMatchObject({
        EventsSent: 8,
        EventsRetried: 2,
        OldestPendingEventSeconds: 7,
        OutboxBacklog: 4,
        StalledTargets: 1,
        service: 'msgx',
      });
      expect(find('EventsSent')._aws.CloudWatchMetrics[0].Dimensions).toEqual([['service']]);
      expect(find('DeadCount')).toMatchObject({ DeadCount: 1, kind: 'event' });
      expect(find('OldestPendingEventSeconds', 'target')).toMatchObject({ OldestPendingEventSeconds: 7, target: 'msg' });
      expect(find('DeadCount')._aws.CloudWatchMetrics[0].Namespace).toBe('msgx');

      // An idle invocation: zeros, and the drained target's gauge comes down to 0.
      lines.length = 0;
      m.recordGauges({ oldestPendingEventSeconds: 0, openEvents: 0, stalledTargets: 0, byTarget: [] });
      m.flush();
      d = docs();
      expect(find('EventsSent')).toMatchObject({ EventsSent: 0, OldestPendingEventSeconds: 0, OutboxBacklog: 0 });
      expect(find('DeadCount')).toMatchObject({ DeadCount: 0 });
      expect(find('OldestPendingEventSeconds', 'target')).toMatchObject({ OldestPendingEventSeconds: 0, target: 'msg' });
    } finally {
      spy.mockRestore();
    }
  });
});
