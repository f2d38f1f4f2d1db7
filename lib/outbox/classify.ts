/*
 * Which delivery failures spend an attempt (table in docs/outbox.md). Pure: the
 * publishers call these on what kafkajs or fetch threw, and the unit tests call them directly.
 *
 * - outage:  the destination as a whole is away (no broker reachable, connection refused, DNS
 *            failure). Not the event's fault: no attempt, the target is shown stalled.
 * - event:   the event or its route is refused (unknown topic or partition, record too large,
 *            authorisation denied, HTTP 4xx/5xx). An attempt is spent; DEAD after the budget.
 * - timeout: one request did not finish in time. publish.ts probes the destination: if it answers
 *            otherwise, the timeout is the event's (an attempt), else an outage.
 */
export type FailureKind = 'outage' | 'event' | 'timeout';

export interface Classified {
  kind: FailureKind;
  /** The error as operators read it: the innermost cause's type or name, and its message. */
  error: string;
}

/** Broker error types that belong to the event or its route: retrying them as-is cannot succeed. */
export const KAFKA_EVENT_ERRORS = new Set([
  'UNKNOWN_TOPIC_OR_PARTITION',
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'INVALID_TOPIC_EXCEPTION',
  'TOPIC_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'POLICY_VIOLATION',
  'INVALID_TIMESTAMP',
  'UNSUPPORTED_FOR_MESSAGE_FORMAT',
  'CORRUPT_MESSAGE',
]);

/** Broker error types that mean "the broker did not finish in time". */
const KAFKA_TIMEOUT_ERRORS = new Set(['REQUEST_TIMED_OUT', 'NOT_ENOUGH_REPLICAS_AFTER_APPEND']);

/** Socket error codes of a destination that cannot be reached at all. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

type ErrLike = Error & { type?: string; code?: string | number; retriable?: boolean; cause?: unknown };

/** The error and its causes, outermost first (kafkajs wraps in NumberOfRetriesExceeded / NonRetriable). */
export function causeChain(err: unknown): ErrLike[] {
  const out: ErrLike[] = [];
  let e: unknown = err;
  while (e instanceof Error && out.length < 8 && !out.includes(e)) {
    out.push(e);
    e = (e as ErrLike).cause;
  }
  return out;
}

const describe = (e: ErrLike) => `${e.type ?? e.name}: ${e.message}`;

// A newer producer holds this transactional.id (or the broker expired our transaction): what the
// transaction carried was aborted, nobody's fault.
const KAFKA_FENCED_ERRORS = new Set(['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED', 'INVALID_PRODUCER_ID_MAPPING']);

/** Whether a transactional producer failed because another one of its transactional.id replaced it. */
export function isProducerFenced(err: unknown): boolean {
  return causeChain(err).some((e) => e.type !== undefined && KAFKA_FENCED_ERRORS.has(e.type));
}

/** A kafkajs error (as thrown by producer.send or the admin client) → what it means for the event. */
export function classifyKafkaError(err: unknown): Classified {
  const chain = causeChain(err);
  if (chain.length === 0) return { kind: 'event', error: String(err) };
  const inner = chain[chain.length - 1]!;
  const error = chain.length > 1 ? `${describe(inner)} (${chain[0]!.name})` : describe(inner);
  for (const e of chain) if (e.type && KAFKA_EVENT_ERRORS.has(e.type)) return { kind: 'event', error };
  for (const e of chain)
    if (e.name === 'KafkaJSRequestTimeoutError' || e.name === 'TimeoutError' || (e.type && KAFKA_TIMEOUT_ERRORS.has(e.type)))
      return { kind: 'timeout', error };
  for (const e of chain)
    if (
      /^KafkaJS(ConnectionError|ConnectionClosedError|BrokerNotFound|MetadataNotLoaded|TopicMetadataNotLoaded|SASLAuthenticationError)$/.test(
        e.name,
      ) ||
      (typeof e.code === 'string' && UNREACHABLE_CODES.has(e.code))
    )
      return { kind: 'outage', error };
  // Anything else kafkajs would retry (no leader, not enough replicas) is the cluster's state,
  // not the event's; what it refuses outright (invalid topic name, bad message) is the event's.
  return { kind: inner.retriable === true ? 'outage' : 'event', error };
}

/** What fetch threw for one webhook POST (its own timeout or the publish deadline included). */
export function classifyFetchError(err: unknown): FailureKind {
  const chain = causeChain(err);
  if (chain.some((e) => e.name === 'TimeoutError' || e.name === 'AbortError')) return 'timeout';
  if (chain.some((e) => typeof e.code === 'string' && UNREACHABLE_CODES.has(e.code))) return 'outage';
  // The connection broke mid-request (socket closed, bad response): the server is there but did
  // not finish this request; the probe decides.
  return 'timeout';
}
