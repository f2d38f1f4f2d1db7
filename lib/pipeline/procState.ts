import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import type { BackfillMark } from '../mailbox/mailbox.ts';
import type { ErrorClass } from '../shared/errors.ts';
import type { ProcStatus } from './states.ts';

/** All SQL on proc_state, proc_attempt and proc_state_hst lives here. */

export interface OpenRow {
  msg_id: number;
  status: 'PENDING' | 'FAILED';
  attempts: number;
  next_attempt_at: Date;
  first_attempt_at: Date | null;
  identity_key: string | null;
  raw_text: string | null;
  error_class: ErrorClass | null;
  error_detail: string | null;
}

export const INBOX_CHANNEL = 'msgx_inbox';

/**
 * Idempotent enqueue of mailbox rows; archived IDs are never enqueued again. Returns new IDs.
 * The NOTIFY for new rows carries `wakePayload` (a local wake's, lib/db/localWake.ts); none is
 * sent with `notify` false (the caller wakes the pump of its own process, which holds the lock).
 */
export async function enqueueMessages(
  q: Queryable,
  rows: { id: number; receivedAt: Date | null }[],
  now: Date,
  wakePayload = '',
  notify = true,
): Promise<number[]> {
  if (rows.length === 0) return [];
  const r = await q.query<{ msg_id: number }>(
    `INSERT INTO proc_state (msg_id, status, next_attempt_at, received_at, enqueued_at, updated_at)
     SELECT v.id, 'PENDING', $3, v.received, $3, $3
     FROM unnest($1::bigint[], $2::timestamptz[]) AS v(id, received)
     WHERE NOT EXISTS (SELECT 1 FROM proc_state_hst h WHERE h.msg_id = v.id)
     ON CONFLICT (msg_id) DO NOTHING
     RETURNING msg_id`,
    [rows.map((r) => r.id), rows.map((r) => r.receivedAt), now],
  );
  if (r.rowCount > 0 && notify) await q.query(`SELECT pg_notify($1, $2)`, [INBOX_CHANNEL, wakePayload]);
  return r.rows.map((x) => x.msg_id);
}

/**
 * The poller's fast path as ONE statement (its own transaction, one round trip): enqueue these
 * rows, write a msgx_state fact (the mailbox frontier, lib/pipeline/frontier.ts) and NOTIFY the
 * pump when a row is new or `wake` is set (and `others`: a pump of this process that holds the
 * lock is woken in-process, and a NOTIFY would reach nobody else). The wake-up latency of every
 * message pays for this path.
 */
export async function enqueueWithFact(
  q: Queryable,
  rows: { id: number; receivedAt: Date | null }[],
  now: Date,
  fact: { key: string; value: unknown },
  wake: boolean,
  wakePayload = '',
  others = true,
): Promise<{ ids: number[]; notified: boolean }> {
  const r = await q.query<{ ids: (number | string)[] | null; notified: boolean }>(
    prepared(`WITH ins AS (
       INSERT INTO proc_state (msg_id, status, next_attempt_at, received_at, enqueued_at, updated_at)
       SELECT v.id, 'PENDING', $3, v.received, $3, $3
       FROM unnest($1::bigint[], $2::timestamptz[]) AS v(id, received)
       WHERE NOT EXISTS (SELECT 1 FROM proc_state_hst h WHERE h.msg_id = v.id)
       ON CONFLICT (msg_id) DO NOTHING
       RETURNING msg_id),
     fact AS (
       INSERT INTO msgx_state (key, value, updated_at) VALUES ($4, $5::jsonb, $3)
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at
       WHERE msgx_state.value IS DISTINCT FROM EXCLUDED.value),
     wake AS (SELECT $6::boolean OR EXISTS (SELECT 1 FROM ins) AS due)
     SELECT (SELECT array_agg(msg_id ORDER BY msg_id) FROM ins) AS ids,
            (SELECT due FROM wake) AS notified,
            CASE WHEN (SELECT due FROM wake) AND $9::boolean THEN pg_notify($7, $8) END AS notify,
            -- Like the poller's transaction path, no wait for the WAL flush: the mailbox is the
            -- durable record, and an enqueue lost in a crash (with its frontier) is read again.
            set_config('synchronous_commit', 'off', true) AS async_commit`),
    [
      rows.map((x) => x.id),
      rows.map((x) => x.receivedAt),
      now,
      fact.key,
      JSON.stringify(fact.value),
      wake,
      INBOX_CHANNEL,
      wakePayload,
      others,
    ],
  );
  return { ids: (r.rows[0]?.ids ?? []).map(Number), notified: r.rows[0]?.notified === true };
}

/**
 * The smallest open messages up to the mailbox frontier (docs/ordering.md: nothing runs while a
 * smaller ID is unaccounted for), head first; whether the pipeline is paused; and the smallest
 * open ID above the frontier, if any (one round trip).
 */
export async function readHead(q: Queryable, limit: number): Promise<{ paused: boolean; rows: OpenRow[]; heldBack: number | null }> {
  const r = await q.query<OpenRow & { paused: boolean | null; held: string | null }>(
    prepared(`WITH flag AS (
       SELECT COALESCE((SELECT (value->>'paused')::boolean FROM msgx_state WHERE key = 'pipeline.paused'), false) AS paused,
              COALESCE((SELECT (value->>'accounted')::bigint FROM msgx_state WHERE key = 'mailbox.frontier'), 0) AS frontier),
     h AS (SELECT msg_id, status, attempts, next_attempt_at, first_attempt_at, identity_key, raw_text, error_class, error_detail
           FROM proc_state WHERE status IN ('PENDING', 'FAILED') ORDER BY msg_id LIMIT $1)
     SELECT flag.paused, (SELECT min(msg_id) FROM h WHERE h.msg_id > flag.frontier) AS held, h.*
     FROM flag LEFT JOIN h ON h.msg_id <= flag.frontier ORDER BY h.msg_id`),
    [limit],
  );
  const paused = r.rows[0]?.paused === true;
  const held = r.rows[0]?.held;
  return {
    paused,
    heldBack: held == null ? null : Number(held),
    rows: r.rows.filter((row) => row.msg_id !== null).map(({ paused: _p, held: _h, ...row }) => row),
  };
}

/** Marks the head FAILED(INFRA) until `until` without counting an attempt (an outage, not its fault). */
export async function holdHead(q: Queryable, msgId: number, reason: string, until: Date, now: Date): Promise<void> {
  await q.query(
    `UPDATE proc_state SET status = 'FAILED', error_class = 'INFRA', error_detail = $2, next_attempt_at = $3, updated_at = $4
     WHERE msg_id = $1 AND status IN ('PENDING', 'FAILED')`,
    [msgId, reason, until, now],
  );
}

/**
 * Locks the group's rows that are still open (a replay or another pump may have moved one) and
 * says who already holds each of its identities, live or archived: one round trip.
 */
export async function lockOpen(
  q: Queryable,
  ids: number[],
  identities: string[],
): Promise<{ locked: Map<number, OpenRow>; holders: Map<string, number> }> {
  const r = await q.query<OpenRow & { holders: [string, number][] | null }>(
    prepared(`WITH locked AS (
       SELECT msg_id, status, attempts, next_attempt_at, first_attempt_at, identity_key, raw_text, error_class, error_detail
       FROM proc_state WHERE msg_id = ANY($1::bigint[]) AND status IN ('PENDING', 'FAILED')
       ORDER BY msg_id FOR UPDATE),
     holders AS (
       SELECT json_agg(json_build_array(identity_key, msg_id)) AS holders FROM (
         SELECT identity_key, msg_id FROM proc_state WHERE identity_key = ANY($2::text[])
         UNION ALL
         SELECT identity_key, msg_id FROM proc_state_hst WHERE identity_key = ANY($2::text[])) x)
     SELECT locked.*, holders.holders FROM holders LEFT JOIN locked ON true ORDER BY locked.msg_id`),
    [ids, identities],
  );
  const locked = new Map<number, OpenRow>();
  for (const { holders: _h, ...row } of r.rows) if (row.msg_id !== null) locked.set(row.msg_id, row);
  return { locked, holders: new Map(r.rows[0]?.holders ?? []) };
}

/**
 * Another message of this identity that already SUCCEEDED (live or archived), if any: a snapshot
 * package seen again under the same identity is then SKIPPED as its duplicate.
 */
export async function succeededWithIdentity(q: Queryable, identity: string, exceptMsgId: number): Promise<number | undefined> {
  const r = await q.query<{ msg_id: number }>(
    `SELECT msg_id FROM proc_state WHERE identity_key = $1 AND status = 'SUCCEEDED' AND msg_id <> $2
     UNION ALL SELECT msg_id FROM proc_state_hst WHERE identity_key = $1 AND status = 'SUCCEEDED' AND msg_id <> $2
     LIMIT 1`,
    [identity, exceptMsgId],
  );
  return r.rows[0]?.msg_id;
}

/** The outcome of one attempt on one message, written back in bulk at the end of a group. */
export interface AttemptRecord {
  msgId: number;
  status: ProcStatus;
  attempt: number;
  startedAt: Date;
  finishedAt: Date;
  firstAttemptAt: Date;
  nextAttemptAt: Date;
  errorClass: ErrorClass | null;
  errorDetail: string | null;
  note: string | null;
  identity: string | null;
  rawText: string | null;
  type: string | null;
  subtype: string | null;
}

/**
 * Writes a group's outcomes in one statement: the proc_state rows, one proc_attempt row each, and
 * the backfill intents of the terminal ones (so the intent commits with the state it reports).
 */
export async function writeAttempts(q: Queryable, recs: AttemptRecord[], todos: BackfillMark[] = []): Promise<void> {
  if (recs.length === 0) return;
  const col = <K extends keyof AttemptRecord>(k: K) => recs.map((r) => r[k]);
  const terminal = recs.map((r) => (r.status === 'PENDING' || r.status === 'FAILED' ? null : r.finishedAt));
  await q.query(
    prepared(`WITH v AS (
       SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
                            $8::timestamptz[], $9::text[], $10::text[], $11::text[], $12::text[], $13::timestamptz[],
                            $14::timestamptz[], $15::timestamptz[])
         AS v(msg_id, status, attempt, error_class, error_detail, note, first_at, next_at, identity, raw_text,
              msg_type, msg_subtype, finished_at, updated_at, started_at)),
     upd AS (
       UPDATE proc_state p SET
         status = v.status, attempts = v.attempt, error_class = v.error_class, error_detail = v.error_detail,
         note = v.note, first_attempt_at = COALESCE(p.first_attempt_at, v.first_at), next_attempt_at = v.next_at,
         -- A DEAD message holds no business identity: a corrected message with the same
         -- SNDR|TYPE|STYP|SEQN is processed, and a replay binds the identity again (or is a duplicate).
         identity_key = CASE WHEN v.status = 'DEAD' THEN NULL ELSE COALESCE(p.identity_key, v.identity) END,
         raw_text = COALESCE(p.raw_text, v.raw_text),
         msg_type = COALESCE(v.msg_type, p.msg_type), msg_subtype = COALESCE(v.msg_subtype, p.msg_subtype),
         finished_at = v.finished_at, updated_at = v.updated_at
       FROM v WHERE p.msg_id = v.msg_id),
     att AS (
       INSERT INTO proc_attempt (msg_id, attempt, started_at, finished_at, outcome, error_class, error_detail)
       SELECT msg_id, attempt, started_at, updated_at, status, error_class, error_detail FROM v),
     todo AS (
       INSERT INTO backfill_todo (msg_id, proc_status, proc_note, processed_at, next_attempt_at)
       SELECT t.id, t.status, t.note, t.at, t.at FROM unnest($16::bigint[], $17::text[], $18::text[], $19::timestamptz[]) AS t(id, status, note, at)
       ON CONFLICT (msg_id) DO UPDATE SET proc_status = EXCLUDED.proc_status, proc_note = EXCLUDED.proc_note,
         processed_at = EXCLUDED.processed_at, attempts = 0, next_attempt_at = EXCLUDED.next_attempt_at, last_error = NULL)
     SELECT 1`),
    [
      col('msgId'),
      col('status'),
      col('attempt'),
      col('errorClass'),
      col('errorDetail'),
      col('note'),
      col('firstAttemptAt'),
      col('nextAttemptAt'),
      col('identity'),
      col('rawText'),
      col('type'),
      col('subtype'),
      terminal,
      col('finishedAt'),
      col('startedAt'),
      todos.map((t) => t.id),
      todos.map((t) => t.status),
      todos.map((t) => t.note),
      todos.map((t) => t.processedAt),
    ],
  );
}

export interface ProcRow {
  msg_id: number;
  status: ProcStatus;
  identity_key: string | null;
  msg_type: string | null;
  msg_subtype: string | null;
  attempts: number;
  next_attempt_at: Date;
  first_attempt_at: Date | null;
  error_class: ErrorClass | null;
  error_detail: string | null;
  note: string | null;
  received_at: Date | null;
  enqueued_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

const PROC_COLUMNS = `msg_id, status, identity_key, msg_type, msg_subtype, attempts, next_attempt_at, first_attempt_at,
  error_class, error_detail, note, received_at, enqueued_at, updated_at, finished_at`;

export async function getProc(q: Queryable, msgId: number): Promise<(ProcRow & { archived: boolean; raw_text: string | null }) | null> {
  const r = await q.query<ProcRow & { archived: boolean; raw_text: string | null }>(
    `SELECT ${PROC_COLUMNS}, raw_text, false AS archived FROM proc_state WHERE msg_id = $1
     UNION ALL SELECT ${PROC_COLUMNS}, raw_text, true FROM proc_state_hst WHERE msg_id = $1`,
    [msgId],
  );
  return r.rows[0] ?? null;
}

export async function listAttempts(q: Queryable, msgId: number) {
  const r = await q.query<{
    attempt: number;
    started_at: Date;
    finished_at: Date;
    outcome: string;
    error_class: string | null;
    error_detail: string | null;
  }>(`SELECT attempt, started_at, finished_at, outcome, error_class, error_detail FROM proc_attempt WHERE msg_id = $1 ORDER BY id`, [
    msgId,
  ]);
  return r.rows;
}

/**
 * Dead or failed messages, newest first, optionally of one error class; DEAD ones already archived
 * to proc_state_hst too (`archived: true`), since they can still be replayed.
 */
export async function listDead(
  q: Queryable,
  filter: { errorClass?: string; limit?: number } = {},
): Promise<(ProcRow & { archived: boolean })[]> {
  const r = await q.query<ProcRow & { archived: boolean }>(
    `SELECT * FROM (
       SELECT ${PROC_COLUMNS}, false AS archived FROM proc_state
       WHERE status IN ('DEAD', 'FAILED') AND ($1::text IS NULL OR error_class = $1)
       UNION ALL
       SELECT ${PROC_COLUMNS}, true FROM proc_state_hst WHERE status = 'DEAD' AND ($1::text IS NULL OR error_class = $1)) d
     ORDER BY msg_id DESC LIMIT $2`,
    [filter.errorClass ?? null, filter.limit ?? 100],
  );
  return r.rows;
}

export interface PipelineStats {
  backlog: number;
  head: { msgId: number; status: string; attempts: number; ageSeconds: number; errorClass: string | null } | null;
  byStatus: Record<string, number>;
  deadByClass: Record<string, number>;
}

export async function pipelineStats(q: Queryable, now: Date): Promise<PipelineStats> {
  const [counts, dead, head] = await Promise.all([
    q.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM proc_state GROUP BY status`),
    q.query<{ error_class: string; n: number }>(
      `SELECT error_class, count(*)::int AS n FROM proc_state WHERE status = 'DEAD' GROUP BY error_class`,
    ),
    q.query<{ msg_id: number; status: string; attempts: number; enqueued_at: Date; error_class: string | null }>(
      `SELECT msg_id, status, attempts, enqueued_at, error_class FROM proc_state
       WHERE status IN ('PENDING', 'FAILED') ORDER BY msg_id LIMIT 1`,
    ),
  ]);
  const byStatus = Object.fromEntries(counts.rows.map((r) => [r.status, r.n]));
  const h = head.rows[0];
  return {
    backlog: (byStatus.PENDING ?? 0) + (byStatus.FAILED ?? 0),
    head: h
      ? {
          msgId: h.msg_id,
          status: h.status,
          attempts: h.attempts,
          ageSeconds: Math.max(0, (now.getTime() - new Date(h.enqueued_at).getTime()) / 1000),
          errorClass: h.error_class,
        }
      : null,
    byStatus,
    deadByClass: Object.fromEntries(dead.rows.map((r) => [r.error_class, r.n])),
  };
}
