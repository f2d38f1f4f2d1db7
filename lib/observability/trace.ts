import { lateOf } from '../pipeline/frontier.ts';
import type { Queryable } from '../db/db.ts';
import type { Mailbox } from '../mailbox/mailbox.ts';
import { snapLogOf } from '../flights/snapLog.ts';
import { MSG_EVENT } from '../flights/events.ts';
import { eventsBySource, type TraceEventView } from '../outbox/sourceEvents.ts';
import { noteFor, todoOf } from '../pipeline/backfill.ts';
import { isTerminalStatus } from '../pipeline/states.ts';
import { getProc, listAttempts } from '../pipeline/procState.ts';
import { REPLAY_ACTION, replaysOf } from '../pipeline/replay.ts';

/**
 * The trace of one inbound message (`GET /admin/trace/{msgId}`, `npx msgx trace`), read from what
 * the pipeline recorded as the work happened, never reconstructed from logs:
 * - proc_state / proc_state_hst: the message, its raw-text copy and its outcome;
 * - proc_attempt: every processing attempt with its outcome, error class and time;
 * - msg_event (source_kind 'proc', source_id = msg id): the flight changes (one msgx.msg event per
 *   changed flight, carrying FLID, state_version and the changed fields) and every event produced;
 * - outbox_batch (and event_delivery before the log relay): each publisher that took an event, with
 *   Kafka partition and offset, read through msgx_event_deliveries;
 * - schd_snap_log: the counts of an applied snapshot package;
 * - backfill_todo and the mailbox itself: whether the mailbox row was back-filled;
 * - audit_log: operator replays that named this message.
 * It is bounded by the same retention as those tables (proc_state moves to proc_state_hst after
 * MSGX_PROC_RETENTION_DAYS and stays readable there; schd_snap_log is kept
 * MSGX_SNAP_LOG_RETENTION_DAYS).
 *
 * `timeline` merges all of it into entries of the same shape as the transactional trace
 * (`GET /admin/tx-messages/{id}/trace` → `trace`): `{seq, at, kind, status, detail}`, so the console
 * and the CLI render both alike.
 */

export interface TimelineEntry {
  seq: number;
  at: string;
  kind: string;
  status: string | null;
  detail: Record<string, unknown>;
}

export interface FlightChangeView {
  flid: string;
  opdy: string | null;
  change: 'created' | 'updated' | 'deleted';
  fromVersion: number | null;
  toVersion: number;
  fields: string[];
  at: string;
  eventId: number;
}

export interface MessageTrace {
  kind: 'proc';
  msgId: number;
  message: {
    msgId: number;
    status: string;
    identity: string | null;
    type: string | null;
    subtype: string | null;
    attempts: number;
    errorClass: string | null;
    errorDetail: string | null;
    note: string | null;
    receivedAt: string | null;
    enqueuedAt: string;
    firstAttemptAt: string | null;
    nextAttemptAt: string | null;
    finishedAt: string | null;
    archived: boolean;
    /** finished_at − enqueued_at, for a finished message. */
    latencyMs: number | null;
    /** Committed after its mailbox ID was declared a hole, and processed late (docs/ordering.md). */
    late: { foundAt: string; via: string } | null;
  };
  mailbox: {
    id: number;
    receivedAt: string | null;
    /** Our copy of MSG_TEXT (kept so replay and trace survive the owner's purge). */
    rawText: string | null;
    /** Asked of the mailbox now: the row still has its text / is marked processed. null = not asked or unreachable. */
    present: boolean | null;
    processed: boolean | null;
    error?: string;
  };
  attempts: {
    attempt: number;
    startedAt: string;
    finishedAt: string;
    outcome: string;
    errorClass: string | null;
    errorDetail: string | null;
  }[];
  flightChanges: FlightChangeView[];
  events: TraceEventView[];
  snapshot: Record<string, unknown>[];
  backfill: {
    /** done: the mailbox row carries the outcome; pending: a write is due or retrying; open: the message is not terminal yet. */
    state: 'done' | 'pending' | 'open' | 'unknown';
    procStatus: string | null;
    procNote: string | null;
    processedAt: string | null;
    attempts: number;
    nextAttemptAt: string | null;
    lastError: string | null;
  };
  replays: { at: string; actor: string; action: string }[];
  timeline: TimelineEntry[];
}

const iso = (d: Date | string | null | undefined): string | null => (d ? new Date(d).toISOString() : null);

/** The mailbox is another team's database: a trace shows what msgx knows without waiting long for it. */
const MAILBOX_TIMEOUT_MS = 2000;

/** The whole trace, or null when msgx never saw (or no longer keeps) this message. */
export async function readMessageTrace(
  db: Queryable,
  msgId: number,
  opts: { mailbox?: Pick<Mailbox, 'readTexts' | 'filterUnprocessed'>; mailboxTimeoutMs?: number } = {},
): Promise<MessageTrace | null> {
  const proc = await getProc(db, msgId);
  if (!proc) return null;
  const [attempts, events, snapshot, todo, replays, mailbox, late] = await Promise.all([
    listAttempts(db, msgId),
    eventsBySource(db, 'proc', String(msgId)),
    snapLogOf(db, msgId).then((rows) => rows.map((x) => ({ ...x, dttm: iso(x.dttm as Date), received_at: iso(x.received_at as Date) }))),
    todoOf(db, msgId),
    replaysOf(db, msgId),
    askMailbox(opts.mailbox, msgId, opts.mailboxTimeoutMs ?? MAILBOX_TIMEOUT_MS),
    lateOf(db, msgId),
  ]);

  const trace: MessageTrace = {
    kind: 'proc',
    msgId,
    message: messageView(proc, late),
    mailbox: { id: msgId, receivedAt: iso(proc.received_at), rawText: proc.raw_text, ...mailbox },
    attempts: attempts.map((a) => ({
      attempt: a.attempt,
      startedAt: iso(a.started_at)!,
      finishedAt: iso(a.finished_at)!,
      outcome: a.outcome,
      errorClass: a.error_class,
      errorDetail: a.error_detail,
    })),
    flightChanges: flightChangesOf(events),
    events: events.map(({ value: _v, ...e }) => e),
    snapshot,
    backfill: backfillView(proc, todo, mailbox),
    replays: replays.map((r) => ({ at: iso(r.at)!, actor: r.actor, action: r.action })),
    timeline: [],
  };
  trace.timeline = buildTimeline(trace);
  return trace;
}

type ProcRead = NonNullable<Awaited<ReturnType<typeof getProc>>>;

function messageView(proc: ProcRead, late: Awaited<ReturnType<typeof lateOf>>): MessageTrace['message'] {
  return {
    msgId: Number(proc.msg_id),
    status: proc.status,
    identity: proc.identity_key,
    type: proc.msg_type,
    subtype: proc.msg_subtype,
    attempts: proc.attempts,
    errorClass: proc.error_class,
    errorDetail: proc.error_detail,
    note: proc.note,
    receivedAt: iso(proc.received_at),
    enqueuedAt: iso(proc.enqueued_at)!,
    firstAttemptAt: iso(proc.first_attempt_at),
    nextAttemptAt: proc.status === 'PENDING' || proc.status === 'FAILED' ? iso(proc.next_attempt_at) : null,
    finishedAt: iso(proc.finished_at),
    archived: proc.archived,
    latencyMs: proc.finished_at ? new Date(proc.finished_at).getTime() - new Date(proc.enqueued_at).getTime() : null,
    late: late ? { foundAt: iso(late.foundAt)!, via: late.via } : null,
  };
}

/** The mailbox write of the outcome: still owed (its todo), not yet due (open), done, or unknown to an unreachable mailbox. */
function backfillView(
  proc: ProcRead,
  todo: Awaited<ReturnType<typeof todoOf>>,
  mailbox: Awaited<ReturnType<typeof askMailbox>>,
): MessageTrace['backfill'] {
  if (todo)
    return {
      state: 'pending',
      procStatus: todo.proc_status,
      procNote: todo.proc_note,
      processedAt: iso(todo.processed_at),
      attempts: todo.attempts,
      nextAttemptAt: iso(todo.next_attempt_at),
      lastError: todo.last_error,
    };
  const terminal = isTerminalStatus(proc.status);
  return {
    // The todo is written with the terminal state and deleted only after the mailbox write.
    state: !terminal ? 'open' : mailbox.processed === false ? 'unknown' : 'done',
    procStatus: terminal ? proc.status : null,
    procNote: terminal ? noteFor(proc.status, proc.error_class, proc.error_detail, proc.note) : null,
    processedAt: terminal ? iso(proc.finished_at) : null,
    attempts: 0,
    nextAttemptAt: null,
    lastError: null,
  };
}

const CHANGE_OF: Record<string, FlightChangeView['change']> = { [MSG_EVENT.created]: 'created', [MSG_EVENT.deleted]: 'deleted' };

/** The flight versions a message made, from its msgx.msg events. */
function flightChangesOf(events: Awaited<ReturnType<typeof eventsBySource>>): FlightChangeView[] {
  return events
    .filter((e) => e.target === 'msg' && e.flid && e.stateVersion !== null)
    .map((e) => {
      const v = e.value ?? {};
      return {
        flid: e.flid!,
        opdy: typeof v.opdy === 'string' ? v.opdy : null,
        change: CHANGE_OF[e.type] ?? 'updated',
        fromVersion: e.stateVersion! > 1 ? e.stateVersion! - 1 : null,
        toVersion: e.stateVersion!,
        fields: Array.isArray(v.changed) ? (v.changed as string[]) : [],
        at: e.createdAt,
        eventId: e.eventId,
      };
    });
}

async function askMailbox(
  mailbox: Pick<Mailbox, 'readTexts' | 'filterUnprocessed'> | undefined,
  id: number,
  timeoutMs: number,
): Promise<{ present: boolean | null; processed: boolean | null; error?: string }> {
  if (!mailbox) return { present: null, processed: null };
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the mailbox did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    const [texts, unprocessed] = await Promise.race([Promise.all([mailbox.readTexts([id]), mailbox.filterUnprocessed([id])]), timeout]);
    const present = texts.has(id);
    // filterUnprocessed cannot tell a processed row from a purged one: ask only about a row that is there.
    return { present, processed: present ? !unprocessed.includes(id) : null };
  } catch (err) {
    return { present: null, processed: null, error: err instanceof Error ? err.message : String(err) };
  } finally {
    clearTimeout(timer);
  }
}

/** Every recorded step of the message, in time order, in the tx trace's entry shape. */
export function buildTimeline(t: MessageTrace): TimelineEntry[] {
  const out: Omit<TimelineEntry, 'seq'>[] = [];
  const m = t.message;
  if (m.receivedAt) out.push({ at: m.receivedAt, kind: 'received', status: null, detail: { mailboxId: t.msgId } });
  out.push({ at: m.enqueuedAt, kind: 'enqueued', status: 'PENDING', detail: {} });
  for (const a of t.attempts)
    out.push({
      at: a.finishedAt,
      kind: 'attempt',
      status: a.outcome,
      detail: { attempt: a.attempt, ...(a.errorClass ? { errorClass: a.errorClass, error: a.errorDetail } : {}) },
    });
  for (const r of t.replays)
    if (r.action === REPLAY_ACTION) out.push({ at: r.at, kind: 'replay', status: 'PENDING', detail: { actor: r.actor } });
  for (const s of t.snapshot)
    out.push({
      at: String(s.received_at),
      kind: 'snapshot',
      status: null,
      detail: {
        styp: s.styp,
        day: s.scope,
        flights: s.flights,
        created: s.created,
        updated: s.updated,
        unchanged: s.unchanged,
        stale: s.stale,
      },
    });
  for (const c of t.flightChanges)
    out.push({
      at: c.at,
      kind: 'flight-change',
      status: null,
      detail: {
        flid: c.flid,
        change: c.change,
        version: c.fromVersion ? `${c.fromVersion} → ${c.toVersion}` : String(c.toVersion),
        fields: c.fields,
      },
    });
  for (const e of t.events) {
    out.push({ at: e.createdAt, kind: 'event', status: null, detail: { eventId: e.eventId, target: e.target, type: e.type, key: e.key } });
    for (const d of e.deliveries)
      out.push({
        at: d.at,
        kind: d.outcome === 'ok' ? 'published' : 'publish-failed',
        status: null,
        detail: {
          eventId: e.eventId,
          publisher: d.publisher,
          ...(d.partition !== null ? { partition: d.partition } : {}),
          ...(d.offset !== null ? { offset: d.offset } : {}),
          ...(d.tries > 1 ? { tries: d.tries } : {}),
          ...(d.error ? { error: d.error } : {}),
        },
      });
    if (e.sentAt)
      out.push({
        at: e.sentAt,
        kind: 'sent',
        status: 'SENT',
        // An older state version is sent as the newest of its flight (msgx.schd keeps the latest state).
        detail: { eventId: e.eventId, target: e.target, ...(e.sentAs && e.sentAs !== e.eventId ? { asEventId: e.sentAs } : {}) },
      });
    if (e.deadAt)
      out.push({ at: e.deadAt, kind: 'event-dead', status: 'DEAD', detail: { eventId: e.eventId, target: e.target, error: e.lastError } });
  }
  const b = t.backfill;
  if (b.state === 'done' && b.processedAt)
    out.push({ at: b.processedAt, kind: 'backfill', status: b.procStatus, detail: { note: b.procNote, mailbox: 'marked processed' } });
  if (b.state === 'pending' && b.processedAt)
    out.push({
      at: b.processedAt,
      kind: 'backfill-pending',
      status: b.procStatus,
      detail: { attempts: b.attempts, nextAttemptAt: b.nextAttemptAt, ...(b.lastError ? { error: b.lastError } : {}) },
    });
  // Stable: same-instant entries keep the order they were recorded in (attempt before its changes and events).
  return out
    .map((e, i) => ({ e, i }))
    .sort((a, b) => Date.parse(a.e.at) - Date.parse(b.e.at) || a.i - b.i)
    .map(({ e }, i) => ({ seq: i + 1, ...e }));
}
