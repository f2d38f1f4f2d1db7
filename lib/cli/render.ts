import type { MessageTrace, TimelineEntry } from '../observability/trace.ts';
import type { TraceEventView } from '../outbox/sourceEvents.ts';
import type { TxMessageView } from '../txmsg/view.ts';
import { ellipsis, keyValues, table, when } from './table.ts';

/**
 * What `msgx trace` and `msgx dead` print for people (the project rule: status and results are
 * tables a person can read). Every line fits in WIDTH columns; the whole answer stays available
 * with `--json`.
 */
export const WIDTH = 120;

const section = (title: string, body: string) => ['', title, body];

/** `msgx trace <msgId>`: the message, its attempts, the flight changes and the events it produced. */
export function renderTrace(t: MessageTrace): string {
  const m = t.message;
  const type = [m.type, m.subtype].filter(Boolean).join('/') || '?';
  const out = [
    `message #${m.msgId}  ${type}  ${m.status}${m.archived ? '  (archived)' : ''}`,
    keyValues(
      {
        identity: m.identity,
        status: m.status,
        attempts: m.attempts,
        error: m.errorClass ? `${m.errorClass}: ${ellipsis(m.errorDetail ?? '', WIDTH - 30)}` : null,
        note: m.note ? ellipsis(m.note, WIDTH - 20) : null,
        received: when(m.receivedAt),
        enqueued: when(m.enqueuedAt),
        'first attempt': when(m.firstAttemptAt),
        'next attempt': when(m.nextAttemptAt),
        finished: m.finishedAt ? `${when(m.finishedAt)}${m.latencyMs !== null ? `  (${m.latencyMs} ms after enqueued)` : ''}` : null,
        late: m.late ? `yes: processed after its ID was declared a hole (found ${when(m.late.foundAt)} by the ${m.late.via})` : null,
        mailbox: mailboxLine(t.mailbox),
        backfill: backfillLine(t.backfill),
      },
      { skipEmpty: true },
    ),
    ...section(
      'ATTEMPTS',
      table(
        t.attempts.map((a) => ({
          '#': a.attempt,
          started: when(a.startedAt),
          ms: Date.parse(a.finishedAt) - Date.parse(a.startedAt),
          outcome: a.outcome,
          class: a.errorClass ?? '',
          error: a.errorDetail ?? '',
        })),
        undefined,
        { width: WIDTH },
      ),
    ),
    ...section(
      'FLIGHT CHANGES',
      table(
        t.flightChanges.map((c) => ({
          flid: c.flid,
          day: c.opdy ?? '',
          change: c.change,
          state_version: c.fromVersion !== null ? `${c.fromVersion} -> ${c.toVersion}` : `- -> ${c.toVersion}`,
          event: c.eventId,
          fields: c.fields.join(', '),
        })),
        undefined,
        { width: WIDTH },
      ),
    ),
    ...section('EVENTS', eventsTable(t.events)),
  ];
  if (t.snapshot.length)
    out.push(
      ...section(
        'SNAPSHOT',
        table(
          t.snapshot.map((s) => ({
            styp: s.styp,
            day: s.scope,
            flights: s.flights,
            created: s.created,
            updated: s.updated,
            unchanged: s.unchanged,
            stale: s.stale,
          })),
        ),
      ),
    );
  if (t.replays.length)
    out.push(...section('REPLAYS', table(t.replays.map((r) => ({ at: when(r.at), actor: r.actor, action: r.action })))));
  out.push('', `(${t.timeline.length} timeline entries; msgx trace ${t.msgId} --json prints everything)`);
  return `${out.join('\n')}\n`;
}

function mailboxLine(b: MessageTrace['mailbox']): string {
  if (b.error) return `not asked: ${ellipsis(b.error, WIDTH - 30)}`;
  if (b.present === null) return 'not asked';
  if (!b.present) return 'row no longer in the mailbox (msgx keeps its text)';
  return b.processed ? 'row present, marked processed' : 'row present, not marked processed yet';
}

function backfillLine(b: MessageTrace['backfill']): string {
  if (b.state === 'pending')
    return ellipsis(
      `pending (${b.attempts} tries, next ${when(b.nextAttemptAt) || '-'}${b.lastError ? `, last error: ${b.lastError}` : ''})`,
      WIDTH - 20,
    );
  if (b.state === 'done') return `done (${b.procStatus}${b.processedAt ? ` at ${when(b.processedAt)}` : ''})`;
  return b.state === 'open' ? 'open (the message is not finished yet)' : 'unknown (the mailbox row is not marked processed)';
}

/** One row per event; each publisher's outcome with its Kafka partition and offset. */
export function eventsTable(events: TraceEventView[]): string {
  return table(
    events.map((e) => ({
      event: e.eventId,
      target: e.target,
      type: e.type,
      status: e.status,
      tries: e.attempts,
      publishers: e.deliveries.map(publisherOutcome).join('; ') || '-',
      'last error': e.lastError ?? e.deliveries.find((d) => d.error)?.error ?? '',
    })),
    undefined,
    { width: WIDTH },
  );
}

function publisherOutcome(d: TraceEventView['deliveries'][number]): string {
  const where = d.partition !== null ? ` p${d.partition}${d.offset !== null ? `@${d.offset}` : ''}` : '';
  return `${d.publisher} ${d.outcome}${where}${d.tries > 1 ? ` x${d.tries}` : ''}`;
}

/** `msgx trace --tx <id>`: the transactional message, its timeline and (when asked for) its events. */
export function renderTxTrace(
  r: { message: TxMessageView & { deadPhase?: string | null }; trace: TimelineEntry[] },
  events?: TraceEventView[],
): string {
  const m = r.message;
  const out = [
    `transactional message ${m.id}  ${m.topic}  ${m.status}${m.archived ? '  (archived)' : ''}`,
    keyValues(
      {
        key: m.key,
        status: m.status,
        deliveries: m.attempts,
        checks: m.checks,
        'check url': m.checkUrl,
        business: m.bizName,
        'created by': m.createdBy,
        created: when(m.createdAt),
        committed: when(m.committedAt),
        delivered: when(m.deliveredAt),
        finished: when(m.finishedAt),
        'next check': when(m.nextCheckAt),
        'next delivery': when(m.nextDeliveryAt),
        dead: m.deadReason ? `${m.deadPhase ? `${m.deadPhase}: ` : ''}${ellipsis(m.deadReason, WIDTH - 30)}` : null,
        'last error': m.lastError ? ellipsis(m.lastError, WIDTH - 20) : null,
        resent: m.resentAt ? `${when(m.resentAt)} by ${m.resentBy ?? '?'}` : null,
      },
      { skipEmpty: true },
    ),
    ...section(
      'TIMELINE',
      table(
        r.trace.map((e) => ({ '#': e.seq, at: when(e.at), kind: e.kind, status: e.status ?? '', detail: detailText(e.detail) })),
        undefined,
        { width: WIDTH },
      ),
    ),
  ];
  if (events) out.push(...section('EVENTS', eventsTable(events)));
  out.push('', `(msgx trace --tx ${m.id} --json prints everything)`);
  return `${out.join('\n')}\n`;
}

/** A timeline entry's detail as `k=v` pairs, shorter than its JSON. */
function detailText(d: Record<string, unknown>): string {
  return Object.entries(d)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join(' ');
}

/** `msgx dead`: the columns an operator picks a replay by, the reason last and cut to fit. */
export function renderDead(kind: string, items: Record<string, unknown>[]): string {
  const s = (v: unknown) => (v === null || v === undefined ? '' : String(v));
  const rows = items.map((x): Record<string, unknown> => {
    if (kind === 'event')
      return {
        event: x.eventId,
        target: x.target,
        type: x.type,
        key: x.key,
        ver: x.stateVersion,
        tries: x.attempts,
        source: x.sourceKind ? `${s(x.sourceKind)}:${s(x.sourceId)}` : '',
        'dead at': when(x.deadAt as string | null),
        'last error': x.lastError,
      };
    if (kind === 'txmsg')
      // Every row is DEAD (GET /admin/dead?kind=txmsg): the phase says where it died.
      return {
        id: x.id,
        topic: x.topic,
        phase: x.deadPhase,
        checks: x.checks,
        tries: x.attempts,
        at: when(x.updatedAt as string | null),
        reason: [x.deadReason, x.lastError].filter(Boolean).join(' / '),
      };
    return {
      msg: x.msg_id,
      // An archived dead letter (moved to proc_state_hst after retention) can still be replayed.
      status: x.archived ? `${s(x.status)} (archived)` : x.status,
      type: [x.msg_type, x.msg_subtype].filter(Boolean).join('/'),
      tries: x.attempts,
      class: x.error_class,
      at: when(isoOf(x.finished_at ?? x.updated_at)),
      detail: x.error_detail,
    };
  });
  // An ID is what the replay or resend is asked with, and a cut time is no time: never cut.
  return table(rows, undefined, { width: WIDTH, keepWhole: ['msg', 'event', 'id', 'at', 'dead at'] });
}

const isoOf = (v: unknown): string | null => (v === null || v === undefined ? null : v instanceof Date ? v.toISOString() : String(v));
