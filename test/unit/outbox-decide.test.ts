import { describe, expect, it } from 'vitest';
import type { ClaimedRow } from '../../lib/outbox/claim.ts';
import { decide } from '../../lib/outbox/decide.ts';
import type { DeliverySettings } from '../../lib/outbox/settings.ts';
import type { Publisher, PublishResult } from '../../lib/outbox/types.ts';

/** The retry rules, apart from any database: an outage spends no attempt, a refusal does. */
const settings: DeliverySettings = {
  batchSize: 100,
  publishTimeoutMs: 3000,
  maxRetryCount: 3,
  initialBackoffMs: 5000,
  maxBackoffMs: 300_000,
  retryStrategy: 'exponential_backoff',
};
const pub = { name: 'kafka' } as Publisher;
const now = new Date('2026-11-29T00:00:00Z');
const row = (id: number, attempts: number): ClaimedRow => ({
  event_id: id,
  partition_key: 'F1',
  event_type: 'T',
  value: '{}',
  headers: {},
  attempts,
  source_kind: 'proc',
  source_id: '1',
  delivered_to: null,
});

describe('delivery outcome rules', () => {
  it('an unreachable destination keeps the attempts and retries after the initial backoff, holding the target', () => {
    const rows = [row(1, 2), row(2, 0)];
    const results: PublishResult[][] = [[{ ok: false, error: 'KafkaJSConnectionError: connect ECONNREFUSED', unavailable: true }, { ok: false, error: 'not sent', notAttempted: true }]];
    const { updates } = decide([pub], settings, now, rows, rows, results, false);
    expect(updates).toEqual([
      { id: 1, status: 'PENDING', attempts: 2, nextAt: new Date(now.getTime() + 5000), error: 'kafka: KafkaJSConnectionError: connect ECONNREFUSED', sentAs: null, stalled: true },
      { id: 2, status: 'PENDING', attempts: 0, nextAt: null, error: null, sentAs: null },
    ]);
  });

  it('a refusal counts an attempt with exponential backoff, and the last one makes the event DEAD', () => {
    const refused: PublishResult[][] = [[{ ok: false, error: 'MESSAGE_TOO_LARGE' }]];
    const first = decide([pub], settings, now, [row(1, 0)], [row(1, 0)], refused, false).updates[0]!;
    expect(first).toMatchObject({ status: 'PENDING', attempts: 1, nextAt: new Date(now.getTime() + 5000) });
    const second = decide([pub], settings, now, [row(1, 1)], [row(1, 1)], refused, false).updates[0]!;
    expect(second).toMatchObject({ status: 'PENDING', attempts: 2, nextAt: new Date(now.getTime() + 10_000) });
    const last = decide([pub], settings, now, [row(1, 2)], [row(1, 2)], refused, false).updates[0]!;
    expect(last).toMatchObject({ status: 'DEAD', attempts: 3, nextAt: null, error: 'kafka: MESSAGE_TOO_LARGE' });
  });
});
