import { describe, expect, it } from 'vitest';
import { renderDead, renderTrace, renderTxTrace, WIDTH } from '../../lib/cli/render.ts';
import { renderStatus, type StatsView } from '../../lib/cli/status.ts';
import type { MessageTrace } from '../../lib/observability/trace.ts';
import type { TraceEventView } from '../../lib/outbox/sourceEvents.ts';

const T0 = '2026-11-29T09:00:00.000Z';
const T1 = '2026-11-29T09:00:00.250Z';
const longError = `webhook https://receiver.example.com/hooks/${'x'.repeat(200)} answered HTTP 500`;

const events: TraceEventView[] = [
  {
    eventId: 41,
    target: 'msg',
    type: 'FLIGHT_UPDATED',
    key: '1001',
    flid: '1001',
    stateVersion: 3,
    attempts: 1,
    lastError: null,
    sentAs: null,
    status: 'SENT',
    createdAt: T1,
    sentAt: T1,
    deadAt: null,
    deliveries: [
      { publisher: 'kafka', outcome: 'ok', partition: 2, offset: '1057', tries: 1, at: T1, error: null },
      { publisher: 'webhook', outcome: 'failed', partition: null, offset: null, tries: 3, at: T1, error: longError },
    ],
  },
];

const trace: MessageTrace = {
  kind: 'proc',
  msgId: 7,
  message: {
    msgId: 7,
    status: 'SUCCEEDED',
    identity: 'FIMS|FLOP|GATE|1043',
    type: 'FLOP',
    subtype: 'GATE',
    attempts: 2,
    errorClass: null,
    errorDetail: null,
    note: null,
    receivedAt: T0,
    enqueuedAt: T0,
    firstAttemptAt: T0,
    nextAttemptAt: null,
    finishedAt: T1,
    archived: false,
    latencyMs: 250,
    late: { foundAt: T1, via: 'rescan' },
  },
  mailbox: { id: 7, receivedAt: T0, rawText: `<MSG>${'<X/>'.repeat(500)}</MSG>`, present: true, processed: true },
  attempts: [
    { attempt: 1, startedAt: T0, finishedAt: T1, outcome: 'FAILED', errorClass: 'INFRA', errorDetail: longError },
    { attempt: 2, startedAt: T0, finishedAt: T1, outcome: 'SUCCEEDED', errorClass: null, errorDetail: null },
  ],
  flightChanges: [
    { flid: '1001', opdy: '20261129', change: 'updated', fromVersion: 2, toVersion: 3, fields: ['gate', 'stand'], at: T1, eventId: 41 },
  ],
  events,
  snapshot: [],
  backfill: { state: 'done', procStatus: 'SUCCEEDED', procNote: null, processedAt: T1, attempts: 0, nextAttemptAt: null, lastError: null },
  replays: [],
  timeline: [],
};

const fits = (text: string) => text.split('\n').filter((l) => l.length > WIDTH);

describe('msgx trace (summary)', () => {
  const text = renderTrace(trace);

  it('names the message: id, type, status, attempts, times, late', () => {
    expect(text).toMatch(/^message #7 {2}FLOP\/GATE {2}SUCCEEDED/);
    expect(text).toMatch(/attempts\s+2/);
    expect(text).toMatch(/finished\s+2026-11-29 09:00:00.*250 ms/);
    expect(text).toMatch(/late\s+yes.*rescan/);
    expect(text).toMatch(/backfill\s+done \(SUCCEEDED/);
  });

  it('shows the attempts, the flight change and the events as tables', () => {
    expect(text).toMatch(/ATTEMPTS\n#\s+started\s+ms\s+outcome\s+class\s+error\n[- ]+\n1\s+2026-11-29 09:00:00\s+250\s+FAILED\s+INFRA/);
    expect(text).toMatch(/FLIGHT CHANGES\n.*state_version[\s\S]*1001\s+20261129\s+updated\s+2 -> 3\s+41\s+gate, stand/);
    expect(text).toMatch(/EVENTS\n.*publishers[\s\S]*41\s+msg\s+FLIGHT_UPDATED\s+SENT\s+1\s+kafka ok p2@1057; webhook failed x3/);
  });

  it('fits 120 columns and leaves out the raw text', () => {
    expect(fits(text)).toEqual([]);
    expect(text).not.toContain('<X/>');
    expect(text).toContain('…');
    expect(text).toContain('msgx trace 7 --json');
  });

  it('says "(none)" for a message that changed nothing', () => {
    const t = renderTrace({ ...trace, flightChanges: [], events: [] });
    expect(t).toMatch(/FLIGHT CHANGES\n\(none\)/);
    expect(t).toMatch(/EVENTS\n\(none\)/);
  });

  it('shows a dead message its error class and detail', () => {
    const t = renderTrace({ ...trace, message: { ...trace.message, status: 'DEAD', errorClass: 'CODEC_ERROR', errorDetail: 'bad GATE' } });
    expect(t).toMatch(/error\s+CODEC_ERROR: bad GATE/);
  });
});

describe('msgx trace --tx (summary)', () => {
  it('shows the message, its timeline and its events', () => {
    const text = renderTxTrace(
      {
        message: {
          id: '0b7f6c2e-1a2b-4c3d-8e9f-001122334455',
          topic: 'orders.events',
          key: 'order-1',
          status: 'CONSUMED',
          attempts: 1,
          checks: 1,
          payload: 'p'.repeat(5000),
          headers: {},
          checkUrl: 'http://shop/check',
          createdAt: T0,
          updatedAt: T1,
          committedAt: T0,
          deliveredAt: T1,
          finishedAt: T1,
          nextCheckAt: null,
          nextDeliveryAt: null,
          deadReason: null,
          lastError: null,
          bizName: null,
          createdBy: null,
          resentBy: null,
          resentAt: null,
          archived: false,
          deadPhase: null,
        },
        trace: [
          { seq: 1, at: T0, kind: 'prepare', status: 'PREPARED', detail: {} },
          { seq: 2, at: T0, kind: 'commit', status: 'COMMITTED', detail: { via: 'check-back', error: longError } },
        ],
      },
      events,
    );
    expect(text).toMatch(/^transactional message 0b7f6c2e-1a2b-4c3d-8e9f-001122334455 {2}orders.events {2}CONSUMED/);
    expect(text).toMatch(/TIMELINE[\s\S]*2\s+2026-11-29 09:00:00\s+commit\s+COMMITTED\s+via=check-back error=webhook/);
    expect(text).toMatch(/EVENTS[\s\S]*kafka ok p2@1057/);
    expect(text).not.toContain('ppppp');
    expect(fits(text)).toEqual([]);
  });
});

describe('msgx dead', () => {
  const proc = {
    msg_id: 123456,
    status: 'DEAD',
    identity_key: 'FIMS|FLOP|GATE|1043',
    msg_type: 'FLOP',
    msg_subtype: 'GATE',
    attempts: 5,
    next_attempt_at: T0,
    first_attempt_at: T0,
    error_class: 'EXHAUSTED',
    error_detail: longError,
    note: null,
    received_at: T0,
    enqueued_at: T0,
    updated_at: T1,
    finished_at: T1,
  };

  it('fits a proc dead letter in 120 columns, its detail cut with an ellipsis', () => {
    const text = renderDead('proc', [proc]);
    expect(fits(text)).toEqual([]);
    const [header, , row] = text.split('\n');
    expect(header!.split(/\s+/)).toEqual(['msg', 'status', 'type', 'tries', 'class', 'at', 'detail']);
    expect(row).toMatch(/^123456\s+DEAD\s+FLOP\/GATE\s+5\s+EXHAUSTED\s+2026-11-29 09:00:00\s+webhook https:.*…$/);
  });

  it('says which dead letters are archived (still replayable)', () => {
    const text = renderDead('proc', [
      { ...proc, archived: true },
      { ...proc, msg_id: 7, archived: false },
    ]);
    expect(fits(text)).toEqual([]);
    const rows = text.split('\n').slice(2);
    expect(rows[0]).toMatch(/^123456\s+DEAD \(archived\)\s+FLOP\/GATE/);
    expect(rows[1]).toMatch(/^7\s+DEAD\s+FLOP\/GATE/);
  });

  it('fits dead events and transactional messages too', () => {
    const ev = renderDead('event', [
      {
        eventId: 9,
        target: 'msg',
        type: 'FLIGHT_UPDATED',
        key: '1001',
        stateVersion: 3,
        attempts: 8,
        lastError: longError,
        sourceKind: 'proc',
        sourceId: '7',
        deadAt: T1,
      },
    ]);
    expect(fits(ev)).toEqual([]);
    expect(ev).toMatch(/9\s+msg\s+FLIGHT_UPDATED\s+1001\s+3\s+8\s+proc:7\s+2026-11-29 09:00:00\s+webhook/);
    const tx = renderDead('txmsg', [
      {
        id: 'abc',
        topic: 'orders.events',
        status: 'DEAD',
        deadPhase: 'check',
        attempts: 0,
        checks: 12,
        updatedAt: T1,
        deadReason: 'check-back said UNKNOWN 12 times',
        lastError: longError,
        payload: 'p'.repeat(900),
      },
    ]);
    expect(fits(tx)).toEqual([]);
    expect(tx).toMatch(/abc\s+orders.events\s+check\s+12\s+0\s+2026-11-29 09:00:00\s+check-back said UNKNOWN 12 times/);
    expect(tx).not.toContain('ppp');
  });
});

describe('msgx dead --kind txmsg with a long topic', () => {
  it('keeps the ID whole (a resend needs it) and still fits 120 columns', () => {
    const id = '0b7f6c2e-1a2b-4c3d-8e9f-001122334455';
    const text = renderDead('txmsg', [
      {
        id,
        topic: 'msgx.journey.points.1764559861234-8f3a2c',
        status: 'DEAD',
        deadPhase: 'delivery',
        attempts: 12,
        checks: 2,
        updatedAt: T1,
        deadReason: 'delivery attempts exhausted',
        lastError: longError,
      },
    ]);
    expect(fits(text)).toEqual([]);
    expect(text.split('\n')[2]).toMatch(
      new RegExp(`^${id}  msgx\\.journe\\S*…\\s+delivery\\s+2\\s+12\\s+2026-11-29 09:00:00\\s+delivery attempts`),
    );
  });
});

describe('msgx status: ORDERING', () => {
  const stats: StatsView = {
    at: T1,
    paused: false,
    pipeline: { backlog: 0, head: null, byStatus: { SUCCEEDED: 3 }, deadByClass: {} },
    ordering: { accounted: 120, scanned: 125, gapsWaiting: 1, holesDeclared: 4, holesOpen: 3, lateRows: 1, oldestGapSeconds: 1.6 },
  };

  it('shows gaps waiting, holes declared and open, late rows, with a hint of what they mean', () => {
    const text = renderStatus(stats);
    expect(text).toMatch(
      /\nORDERING \(a missing mailbox ID is a gap, waited for up to MSGX_GAP_GRACE, then a hole; a row found in a hole runs late\)\ngaps waiting/,
    );
    expect(text).toMatch(/gaps waiting\s+1 \(oldest 2s/);
    expect(text).toMatch(/holes\s+4 declared, 3 still open/);
    expect(text).toMatch(/late rows\s+1\n/);
    expect(text).toMatch(/frontier\s+accounted 120, scanned 125/);
    expect(fits(text)).toEqual([]);
  });

  it('says no gap plainly', () => {
    expect(renderStatus({ ...stats, ordering: { ...stats.ordering!, gapsWaiting: 0 } })).toMatch(/gaps waiting\s+0\n/);
  });
});
