import type { OrderingStats } from '../pipeline/frontier.ts';
import { keyValues, table } from './table.ts';

/** `msgx status`: the /admin/stats answer as text (stalled, stale and topic-less targets said plainly). */
export interface StatsView {
  at: string;
  paused: boolean;
  pipeline: {
    backlog: number;
    head: Record<string, unknown> | null;
    byStatus: Record<string, number>;
    deadByClass: Record<string, number>;
  };
  /** Mailbox order (docs/ordering.md): gaps waited for, holes, late rows. */
  ordering?: OrderingStats;
  events?: {
    target: string;
    pending: number;
    delivering?: number;
    oldestAgeSeconds: number | null;
    dead: number;
    headAttempts?: number;
    stalledSeconds?: number | null;
    headLastError?: string | null;
  }[];
  /** Dead events per target, also targets with nothing open. */
  deadEvents?: Record<string, number>;
  txmsg?: Record<string, number>;
  staleAfterSeconds?: number;
  staleTargets?: {
    target: string;
    ageSeconds: number;
    headEventId: number;
    headAttempts: number;
    reason: string | null;
    stalledSeconds: number | null;
  }[];
  missingTopics?: { target: string; topic: string; open: number }[] | null;
  missingTopicsError?: string;
}

export function renderStatus(s: StatsView): string {
  const head = s.pipeline.head;
  const out = [
    keyValues({
      pipeline: s.paused ? 'PAUSED' : 'running',
      backlog: s.pipeline.backlog,
      head: head
        ? `#${head.msgId} ${head.status} attempts=${head.attempts} age=${Math.round(Number(head.ageSeconds))}s${head.errorClass ? ` ${head.errorClass}` : ''}`
        : '(empty)',
    }),
    '',
    'messages by status',
    table(Object.entries(s.pipeline.byStatus).map(([status, count]) => ({ status, count }))),
    '',
    'dead by class',
    table(Object.entries(s.pipeline.deadByClass).map(([errorClass, count]) => ({ errorClass, count }))),
  ];
  if (s.ordering) out.push('', ...renderOrdering(s.ordering));
  if (s.events) {
    const open = new Set(s.events.map((e) => e.target));
    // Targets with dead events but nothing open are not in `events`; they still belong in the table.
    const deadOnly = Object.entries(s.deadEvents ?? {}).filter(([target]) => !open.has(target));
    out.push(
      '',
      'events by target',
      table([
        ...s.events.map((e) => ({
          target: e.target,
          pending: e.pending,
          oldest: `${e.oldestAgeSeconds ?? 0}s`,
          dead: e.dead,
          // stalled = held by an outage (no attempt spent); failing = its head spends attempts.
          state: e.stalledSeconds != null ? `STALLED ${e.stalledSeconds}s` : e.headAttempts ? `failing x${e.headAttempts}` : 'ok',
          'last error': (e.headLastError ?? '').slice(0, 120),
        })),
        ...deadOnly.map(([target, dead]) => ({ target, pending: 0, oldest: '-', dead, state: 'ok', 'last error': '' })),
      ]),
    );
  }
  if (s.staleTargets?.length)
    out.push(
      '',
      `STALE TARGETS (head older than ${s.staleAfterSeconds}s, MSGX_STALE_TARGET_AFTER)`,
      table(
        s.staleTargets.map((t) => ({
          target: t.target,
          age: `${t.ageSeconds}s`,
          head: `#${t.headEventId} attempts=${t.headAttempts}`,
          stalled: t.stalledSeconds != null ? `${t.stalledSeconds}s` : '',
          reason: (t.reason ?? '').slice(0, 120),
        })),
      ),
    );
  if (s.missingTopics?.length)
    out.push('', 'MISSING KAFKA TOPICS', table(s.missingTopics.map((m) => ({ topic: m.topic, target: m.target, waiting: m.open }))));
  if (s.missingTopicsError) out.push('', `Kafka topics not checked: ${s.missingTopicsError}`);
  if (s.txmsg) out.push('', 'transactional messages by state', table(Object.entries(s.txmsg).map(([state, count]) => ({ state, count }))));
  return `${out.join('\n')}\n`;
}

/** The ORDERING section: what holds the head back (gaps) and what was given up on (holes, late rows). */
export function renderOrdering(o: OrderingStats): string[] {
  return [
    // One line of hint; docs/ordering.md says the rest.
    'ORDERING (a missing mailbox ID is a gap, waited for up to MSGX_GAP_GRACE, then a hole; a row found in a hole runs late)',
    keyValues({
      'gaps waiting': o.gapsWaiting ? `${o.gapsWaiting} (oldest ${Math.round(o.oldestGapSeconds)}s, rows above wait)` : 0,
      holes: `${o.holesDeclared} declared, ${o.holesOpen} still open (never filled)`,
      'late rows': o.lateRows,
      frontier: `accounted ${o.accounted}, scanned ${o.scanned}`,
    }),
  ];
}
