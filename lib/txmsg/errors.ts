import { RequestError } from '../shared/errors.ts';
import type { TxStatus } from './states.ts';

/** 404: no live or archived message has this id. */
export class TxNotFoundError extends RequestError {
  constructor(id: string) {
    super(404, 'not_found', `no transactional message ${id}`);
    this.name = 'TxNotFoundError';
  }
}

/** 409: the action cannot happen in the message's current state (commit after rollback, ack before commit). */
export class TxIllegalTransitionError extends RequestError {
  constructor(
    readonly id: string,
    readonly action: string,
    readonly state: TxStatus,
    reason?: string,
  ) {
    super(409, 'illegal_transition', reason ?? `cannot ${action} message ${id} in state ${state}`, { state });
    this.name = 'TxIllegalTransitionError';
  }
}

/** 400 naming the offending field; nothing is stored. */
export class TxValidationError extends RequestError {
  constructor(
    readonly field: string,
    reason: string,
  ) {
    super(400, 'invalid_request', `${field}: ${reason}`, { field });
    this.name = 'TxValidationError';
  }
}

/** 409: an Idempotency-Key reused with a different request body. */
export class TxIdempotencyConflictError extends RequestError {
  constructor(key: string, id: string) {
    super(409, 'idempotency_conflict', `Idempotency-Key ${key} was used for message ${id} with a different body`, { id });
    this.name = 'TxIdempotencyConflictError';
  }
}

/** 422: the Kafka cluster has no such topic, so the message could never be delivered; nothing is stored. */
export class TxUnknownTopicError extends RequestError {
  constructor(readonly topic: string) {
    super(
      422,
      'unknown_topic',
      `topic ${topic} does not exist on the Kafka cluster (msgx does not create producers' topics; ask the operator to create it or list it in MSGX_TX_TOPICS)`,
      { topic },
    );
    this.name = 'TxUnknownTopicError';
  }
}

/** 403: MSGX_TX_TOPICS is set and does not list the topic; nothing is stored. */
export class TxTopicNotAllowedError extends RequestError {
  constructor(
    readonly topic: string,
    allowed: string[],
  ) {
    super(403, 'topic_not_allowed', `topic ${topic} is not in MSGX_TX_TOPICS (${allowed.join(', ')})`, { topic, allowed });
    this.name = 'TxTopicNotAllowedError';
  }
}

/** 403: the topic is one msgx publishes its own records to (flight events, compacted flight state); nothing is stored. */
export class TxTopicReservedError extends RequestError {
  constructor(
    readonly topic: string,
    variable: string,
  ) {
    super(
      403,
      'topic_not_allowed',
      `topic ${topic} is msgx's own (${variable}): its consumers read only msgx's records, so transactional messages go to the producer's own topics`,
      { topic },
    );
    this.name = 'TxTopicReservedError';
  }
}

/** 503: whether the topic exists cannot be checked because Kafka does not answer; nothing is stored. */
export class TxTopicCheckUnavailableError extends RequestError {
  constructor(
    readonly topic: string,
    reason: string,
  ) {
    super(503, 'kafka_unavailable', `cannot check that topic ${topic} exists: ${reason}`, { topic });
    this.name = 'TxTopicCheckUnavailableError';
  }
}
