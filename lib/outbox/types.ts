import type { Config } from '../config/config.ts';
import type { Db, Queryable } from '../db/db.ts';
import type { Log } from '../observability/logger.ts';
import type { Clock } from '../shared/clock.ts';
import type { OutboxMetrics } from './metrics.ts';
import type { ExactlyOnceSinks } from './exactlyOnce.ts';

/**
 * The relay's central types. A Publisher takes a batch of records for one topic, in event_id
 * order, and answers one result per record, in the same order.
 */

/** One outbox event as a publisher sees it. */
export interface OutRecord {
  eventId: number;
  /** The delivery target the event belongs to: 'msg', 'schd' or 'tx:<topic>'. */
  target: string;
  /** The Kafka topic (or file name, or webhook label) the target maps to. */
  topic: string;
  /** Kafka key (the FLID for flight events); null for none. */
  key: string | null;
  /** The value as text; null is a tombstone. */
  value: string | null;
  /** msgx-event-type. */
  type: string;
  /** The event's own headers plus msgx-event-id and msgx-event-type. */
  headers: Record<string, string>;
}

export type PublishResult =
  | { ok: true; partition?: number; offset?: number }
  | {
      ok: false;
      error: string;
      /** Not tried because an earlier record failed: not this record's fault. */
      notAttempted?: boolean;
      /**
       * The destination as a whole could not be reached (no broker reachable, connection refused,
       * DNS failure): an outage, not this event's fault. No attempt is counted, so an outage of any
       * length kills nothing; the event is tried again after the initial backoff and its target is
       * shown stalled. Everything else that failed (refused, too large, 4xx/5xx) spends an attempt.
       */
      unavailable?: boolean;
      /**
       * The request timed out. Ambiguous on its own: publish.ts asks the publisher's probe whether
       * the destination answers otherwise (then the event spends an attempt) or not (an outage).
       */
      timedOut?: boolean;
    };

export interface Publisher {
  /** Stable: it names the publisher in outbox_batch (the trace) and in logs. */
  readonly name: string;
  /**
   * Publishes `records` (one topic, event_id order) and resolves one result per record. It must
   * give up when `signal` aborts (the publish deadline); the dispatcher also stops waiting then.
   */
  publish(records: OutRecord[], signal: AbortSignal): Promise<PublishResult[]>;
  /**
   * Resolves when the destination answers at all (a cheap request that involves no event), rejects
   * when it does not. Used after a timeout to tell a hanging event from an outage; a publisher
   * without a probe has its timeouts treated as outages.
   */
  probe?(signal: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/** Header names on every record (the consumers' dedupe key and type). */
export const HEADER_EVENT_ID = 'msgx-event-id';
export const HEADER_EVENT_TYPE = 'msgx-event-type';

/** What every view of an outbox event shows (dead list, trace, console). */
export interface EventSummary {
  eventId: number;
  target: string;
  type: string;
  key: string | null;
  flid: string | null;
  stateVersion: number | null;
  attempts: number;
  lastError: string | null;
  /** schd aggregation: the event this older version went out as (or down with). */
  sentAs: number | null;
}

/** One event of a batch as the relay read it from the log, with its failed tries so far. */
export interface ClaimedRow {
  event_id: number;
  partition_key: string | null;
  event_type: string;
  value: string | null;
  headers: Record<string, unknown> | null;
  attempts: number;
  source_kind: string | null;
  source_id: string | null;
  /** The publishers that already took it (a failed head retried skips them). */
  delivered_to: string[] | null;
  /** schd only: the aggregation group and the event that represents it. */
  grp?: string;
  newest_id?: number;
}

/** What a delivery round runs with; every stage of a round takes it too (so none imports dispatcher.ts). */
export type DispatchContext = { db: Db; config: Config; clock: Clock; log: Log };

export interface SentEvent {
  eventId: number;
  sourceKind: string;
  sourceId: string | null;
}

export type OutcomeHook = (tx: Queryable, events: SentEvent[], now: Date) => Promise<void>;

export interface DispatchOptions {
  /** The owner of the targets' leases; one per dispatcher instance. Default: host:pid:random of this process. */
  dispatcherId?: string;
  /** Called in the transaction that finishes a batch, with its SENT events (txmsg moves tx_message to DELIVERED). */
  onSent?: OutcomeHook;
  /** Called in the transaction that records events DEAD. */
  onDead?: OutcomeHook;
  /** Called in the transaction that records a failed try that will be retried (events carry `error`). */
  onRetry?: (tx: Queryable, events: (SentEvent & { error: string })[], now: Date) => Promise<void>;
  /**
   * The source kinds the hooks act on (the txmsg hooks: 'txmsg'). A batch without an event of one
   * of these kinds is finished in one statement, without a transaction and without the hooks.
   * Unset: the hooks see every batch.
   */
  hookSources?: string[];
  metrics?: OutboxMetrics;
  /**
   * The log relay's Kafka side when MSGX_KAFKA_EXACTLY_ONCE is on: batches and cursors in one Kafka
   * transaction per target, instead of the publisher it names (`replaces`).
   */
  exactlyOnce?: ExactlyOnceSinks;
  /** Only these targets this round (default: every target with open events). */
  targets?: string[];
  /**
   * Batches per target per round while batches come back full (default 1). A loop passes more:
   * the following batches skip discovery, which keeps the database round trips per page at two.
   */
  maxBatches?: number;
}
