import { describe, expect, it } from 'vitest';
import type { ClaimedRow } from '../../lib/outbox/claim.ts';
import { decideRun, decideSchdFlush } from '../../lib/outbox/decide.ts';
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
    const results: PublishResult[][] = [
      [
        { ok: false, error: 'KafkaJSConnectionError: connect ECONNREFUSED', unavailable: true },
        { ok: false, error: 'not sent', notAttempted: true },
      ],
    ];
    const { updates } = decideRun({ pubs: [pub], settings, now, sent: rows, results });
    expect(updates).toEqual([
      {
        id: 1,
        status: 'PENDING',
        attempts: 2,
        nextAt: new Date(now.getTime() + 5000),
        error: 'kafka: KafkaJSConnectionError: connect ECONNREFUSED',
        sentAs: null,
        stalled: true,
      },
      { id: 2, status: 'PENDING', attempts: 0, nextAt: null, error: null, sentAs: null },
    ]);
  });

  it('a refusal counts an attempt with exponential backoff, and the last one makes the event DEAD', () => {
    const refused: PublishResult[][] = [[{ ok: false, error: 'MESSAGE_TOO_LARGE' }]];
    const first = decideRun({ pubs: [pub], settings, now, sent: [row(1, 0)], results: refused }).updates[0]!;
    expect(first).toMatchObject({ status: 'PENDING', attempts: 1, nextAt: new Date(now.getTime() + 5000) });
    const second = decideRun({ pubs: [pub], settings, now, sent: [row(1, 1)], results: refused }).updates[0]!;
    expect(second).toMatchObject({ status: 'PENDING', attempts: 2, nextAt: new Date(now.getTime() + 10_000) });
    const last = decideRun({ pubs: [pub], settings, now, sent: [row(1, 2)], results: refused }).updates[0]!;
    expect(last).toMatchObject({ status: 'DEAD', attempts: 3, nextAt: null, error: 'kafka: MESSAGE_TOO_LARGE' });
  });
});

describe('an ordinary run: nothing overtakes a failed event', () => {
  it('rows after the first failure go back to PENDING uncharged, and their failures are not recorded', () => {
    const rows = [row(1, 0), row(2, 0), row(3, 1), row(4, 0)];
    const results: PublishResult[][] = [
      [{ ok: true, partition: 2, offset: 7 }, { ok: false, error: 'INVALID_RECORD' }, { ok: false, error: 'INVALID_RECORD' }, { ok: true }],
    ];
    const { updates, outcomes } = decideRun({ pubs: [pub], settings, now, sent: rows, results });
    expect(updates.map((u) => [u.id, u.status, u.attempts, u.error])).toEqual([
      [1, 'SENT', 0, null],
      [2, 'PENDING', 1, 'kafka: INVALID_RECORD'],
      [3, 'PENDING', 1, null],
      [4, 'PENDING', 0, null],
    ]);
    // Row 4 was taken by the publisher: its outcome is kept so a retry skips it; row 3's failure is not its own.
    expect(outcomes.map((o) => [o.id, o.ok, o.partition, o.offset])).toEqual([
      [1, true, 2, 7],
      [2, false, null, null],
      [4, true, null, null],
    ]);
  });
});

describe('the schd flush: one record per FLID stands for its group', () => {
  const member = (id: number, newest: number, attempts = 0): ClaimedRow => ({ ...row(id, attempts), grp: `F${newest}`, newest_id: newest });
  // Two flights: A with versions 1, 3 (newest 3); B with version 2 alone.
  const claimed = [member(1, 3), member(2, 2), member(3, 3)];
  const sent = [member(2, 2), member(3, 3)];

  it('a flight that went out is SENT whole, the older versions with sent_as', () => {
    const { updates } = decideSchdFlush({ pubs: [pub], settings, now, sent, claimed, results: [[{ ok: true }, { ok: true }]] });
    expect(updates.map((u) => [u.id, u.status, u.sentAs])).toEqual([
      [2, 'SENT', null],
      [3, 'SENT', null],
      [1, 'SENT', 3],
    ]);
  });

  it('a failed flight backs off on its newest version alone and holds no other flight', () => {
    const { updates } = decideSchdFlush({
      pubs: [pub],
      settings,
      now,
      sent,
      claimed,
      results: [[{ ok: true }, { ok: false, error: 'INVALID_RECORD' }]],
    });
    expect(updates.map((u) => [u.id, u.status, u.attempts, u.nextAt])).toEqual([
      [2, 'SENT', 0, null],
      [3, 'PENDING', 1, new Date(now.getTime() + 5000)],
      [1, 'PENDING', 0, null],
    ]);
  });

  it('a newest version that dies takes the versions it stands for with it; one not attempted is not charged', () => {
    const dead = decideSchdFlush({
      pubs: [pub],
      settings,
      now,
      sent: [member(2, 2), member(3, 3, 2)],
      claimed: [member(1, 3), member(2, 2), member(3, 3, 2)],
      results: [
        [
          { ok: false, error: 'x', notAttempted: true },
          { ok: false, error: 'MESSAGE_TOO_LARGE' },
        ],
      ],
    });
    expect(dead.updates.map((u) => [u.id, u.status, u.attempts, u.sentAs])).toEqual([
      [2, 'PENDING', 0, null],
      [3, 'DEAD', 3, null],
      [1, 'DEAD', 0, 3],
    ]);
    expect(dead.updates[2]!.error).toBe('superseded by dead event 3');
  });
});
