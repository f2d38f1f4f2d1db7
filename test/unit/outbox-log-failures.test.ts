import { describe, expect, it } from 'vitest';
import { charge, verdictOf } from '../../lib/outbox/logFailures.ts';
import type { DeliverySettings } from '../../lib/outbox/settings.ts';
import type { ClaimedRow, Publisher, PublishResult } from '../../lib/outbox/types.ts';

/** The retry rules of the log relay, apart from any database: an outage spends no attempt, a refusal does. */
const settings: DeliverySettings = {
  batchSize: 100,
  publishTimeoutMs: 3000,
  maxRetryCount: 3,
  initialBackoffMs: 5000,
  maxBackoffMs: 300_000,
  retryStrategy: 'exponential_backoff',
};
const kafka = { name: 'kafka' } as Publisher;
const hook = { name: 'webhook:http://x/' } as Publisher;
const now = new Date('2026-11-29T00:00:00Z');
const row = (id: number, attempts: number, deliveredTo: string[] | null = null): ClaimedRow => ({
  event_id: id,
  partition_key: 'F1',
  event_type: 'T',
  value: '{}',
  headers: {},
  attempts,
  source_kind: 'proc',
  source_id: '1',
  delivered_to: deliveredTo,
});

describe('what one event’s results say', () => {
  it('an unreachable destination is an outage (nobody is charged); a record not tried is not this event’s fault', () => {
    const away: PublishResult = { ok: false, error: 'KafkaJSConnectionError: connect ECONNREFUSED', unavailable: true };
    expect(verdictOf([kafka], [away])).toEqual({ kind: 'outage', error: 'kafka: KafkaJSConnectionError: connect ECONNREFUSED' });
    expect(verdictOf([kafka], [{ ok: false, error: 'not sent', notAttempted: true }])).toEqual({
      kind: 'untried',
      error: 'kafka: not sent',
    });
    expect(verdictOf([kafka, hook], [{ ok: true }, { ok: true }])).toEqual({ kind: 'ok' });
  });

  it('a refusal by one publisher is charged, naming the publishers that did take it', () => {
    expect(verdictOf([kafka, hook], [{ ok: true }, { ok: false, error: 'HTTP 500' }])).toEqual({
      kind: 'charged',
      error: 'webhook:http://x/: HTTP 500',
      took: ['kafka'],
    });
  });
});

describe('charging a failed event', () => {
  it('counts an attempt with exponential backoff, and the last one makes the event DEAD', () => {
    expect(charge(settings, now, row(1, 0), 'kafka: MESSAGE_TOO_LARGE', [])).toMatchObject({
      attempts: 1,
      dead: false,
      nextAt: new Date(now.getTime() + 5000),
    });
    expect(charge(settings, now, row(1, 1), 'kafka: MESSAGE_TOO_LARGE', [])).toMatchObject({
      attempts: 2,
      dead: false,
      nextAt: new Date(now.getTime() + 10_000),
    });
    expect(charge(settings, now, row(1, 2), 'kafka: MESSAGE_TOO_LARGE', [])).toMatchObject({
      attempts: 3,
      dead: true,
      nextAt: null,
      error: 'kafka: MESSAGE_TOO_LARGE',
    });
  });

  it('remembers every publisher that took the event, so its retry skips them', () => {
    expect(charge(settings, now, row(1, 1, ['kafka']), 'x', ['webhook:http://x/']).deliveredTo).toEqual(['kafka', 'webhook:http://x/']);
  });
});
