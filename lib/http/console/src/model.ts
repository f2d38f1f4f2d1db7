/**
 * The JSON the console reads from the admin API, as the browser gets it (times are ISO strings),
 * listing only what the console reads. Mirrored, not imported: the server's types live in modules
 * that import the database drivers. test/unit/console-api-types.test.ts has tsc check that the
 * server's types, serialised, still fit these. No DOM here: the root tsconfig compiles it too.
 */

/** Error classes a replay accepts (lib/pipeline/states.ts REPLAYABLE_CLASSES). */
export const REPLAYABLE: readonly string[] = ['CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'EXHAUSTED'];
/** Every processing error class, for the dead-letter filter (lib/shared/errors.ts ErrorClass). */
export const CLASSES = ['MALFORMED', 'PROTOCOL', 'CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'EXHAUSTED'] as const;

export type DeadKind = 'proc' | 'event' | 'txmsg';

// ---------------------------------------------------------------- GET /admin/stats

export interface TargetBacklogJson {
  target: string;
  pending: number;
  delivering: number;
  headEventId: number;
  headAttempts: number;
  oldestAgeSeconds: number;
  dead: number;
  headLastError: string | null;
  stalledSeconds: number | null;
}

export interface StaleTargetJson {
  target: string;
  ageSeconds: number;
  headEventId: number;
  headAttempts: number;
  reason: string | null;
  stalledSeconds: number | null;
}

export interface MissingTopicJson {
  target: string;
  topic: string;
  open: number;
}

export interface StatsJson {
  at: string;
  paused: boolean;
  pipeline: {
    backlog: number;
    head: { msgId: number; status: string; attempts: number; ageSeconds: number; errorClass: string | null } | null;
    byStatus: Record<string, number>;
    deadByClass: Record<string, number>;
  };
  ordering: { accounted: number; gapsWaiting: number; holesDeclared: number; lateRows: number };
  events: TargetBacklogJson[];
  /** Dead events per target, including targets with nothing open (absent from `events`). */
  deadEvents: Record<string, number>;
  txmsg: Record<string, number>;
  staleTargets: StaleTargetJson[];
  /** null when Kafka could not be asked. */
  missingTopics: MissingTopicJson[] | null;
}

// ---------------------------------------------------------------- GET /admin/throughput

export interface MinuteBucketJson {
  minute: string;
  processed: number;
  succeeded: number;
  skipped: number;
  dead: number;
  latencyAvgMs: number | null;
  latencyP95Ms: number | null;
}

export interface ThroughputJson {
  buckets: MinuteBucketJson[];
  totals: { processed: number; latencyAvgMs: number | null; latencyP95Ms: number | null };
}

// ---------------------------------------------------------------- GET /admin/dead?kind=…

/** kind=proc: proc_state rows as they are (snake_case). */
export interface DeadProcJson {
  msg_id: number;
  status: string;
  msg_type: string | null;
  msg_subtype: string | null;
  attempts: number;
  error_class: string | null;
  error_detail: string | null;
  updated_at: string;
  finished_at: string | null;
}

export interface DeadEventJson {
  eventId: number;
  target: string;
  type: string;
  key: string | null;
  stateVersion: number | null;
  attempts: number;
  lastError: string | null;
  sourceKind: string | null;
  sourceId: string | null;
  deadAt: string | null;
}

/** A transactional message (lib/txmsg/view.ts TxMessageView) with where it died. */
export interface TxMessageJson {
  id: string;
  topic: string;
  key: string | null;
  status: string;
  attempts: number;
  checks: number;
  payload: string;
  headers: Record<string, string>;
  checkUrl: string;
  createdAt: string;
  updatedAt: string;
  committedAt: string | null;
  deliveredAt: string | null;
  finishedAt: string | null;
  nextCheckAt: string | null;
  nextDeliveryAt: string | null;
  deadReason: string | null;
  lastError: string | null;
  bizName: string | null;
  createdBy: string | null;
  resentBy: string | null;
  resentAt: string | null;
  archived: boolean;
  deadPhase: 'check' | 'delivery' | null;
}

export interface DeadRows {
  proc: DeadProcJson;
  event: DeadEventJson;
  txmsg: TxMessageJson;
}

export interface DeadListJson<K extends DeadKind> {
  kind: K;
  items: DeadRows[K][];
}

// ---------------------------------------------------------------- POST /admin/replay, resend

/** The proc and the event replay answer in the same shape (lib/http/adminRoutes.ts). */
export interface ReplayJson {
  dryRun: boolean;
  moved: { msgId?: number; eventId?: number }[];
  refused: { msgId?: number; eventId?: number; reason: string }[];
  warnings: string[];
}

export interface ResendJson {
  id: string;
  status: string;
}

// ---------------------------------------------------------------- traces

/** One entry of either trace (inbound message or transactional message). */
export interface TimelineEntryJson {
  seq: number;
  at: string;
  kind: string;
  status: string | null;
  detail: Record<string, unknown>;
}

export interface EventDeliveryJson {
  publisher: string;
  outcome: string;
  partition: number | null;
  offset: string | null;
  tries: number;
  error: string | null;
}

/** An event a source produced (lib/outbox/sourceEvents.ts TraceEventView). */
export interface TraceEventJson {
  eventId: number;
  target: string;
  type: string;
  key: string | null;
  stateVersion: number | null;
  status: string;
  attempts: number;
  sentAs: number | null;
  sentAt: string | null;
  deadAt: string | null;
  deliveries: EventDeliveryJson[];
}

/** A row of schd_snap_log (the server types it as a plain record). */
export interface SnapshotRowJson {
  styp: string;
  scope: string | null;
  flights: number;
  created: number;
  updated: number;
  unchanged: number;
  stale: number;
}

/** GET /admin/trace/{msgId} (lib/observability/trace.ts MessageTrace). */
export interface MessageTraceJson {
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
    nextAttemptAt: string | null;
    finishedAt: string | null;
    archived: boolean;
    latencyMs: number | null;
  };
  mailbox: { id: number; rawText: string | null; present: boolean | null; processed: boolean | null; error?: string };
  attempts: { finishedAt: string; outcome: string; errorClass: string | null; errorDetail: string | null }[];
  flightChanges: { flid: string; opdy: string | null; change: string; fromVersion: number | null; toVersion: number; fields: string[] }[];
  events: TraceEventJson[];
  snapshot: SnapshotRowJson[];
  backfill: {
    state: string;
    procStatus: string | null;
    procNote: string | null;
    processedAt: string | null;
    attempts: number;
    nextAttemptAt: string | null;
    lastError: string | null;
  };
  timeline: TimelineEntryJson[];
}

/** GET /admin/tx-messages/{id}/trace. */
export interface TxTraceJson {
  message: TxMessageJson;
  trace: TimelineEntryJson[];
}

/** GET /admin/events?sourceKind=…&sourceId=… */
export interface SourceEventsJson {
  items: TraceEventJson[];
}
