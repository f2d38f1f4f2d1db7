/** The outbox relay's public surface (issue 4). */
export { enqueueEvents, OUTBOX_CHANNEL, type NewEvent } from './enqueue.ts';
export {
  dispatchOnce,
  topicForTarget,
  type DispatchContext,
  type DispatchOptions,
  type DispatchReport,
  type OutcomeHook,
  type SentEvent,
  type TargetReport,
} from './dispatcher.ts';
export { buildPublishers, closePublishers, FileSinkPublisher, KafkaPublisher, WebhookPublisher, ENFORCED_PRODUCER, signBody, SIGNATURE_HEADER } from './publishers/index.ts';
export { ensureTopics, type EnsureTopicsResult } from './topics.ts';
export { replayDeadEvents, type ReplayRequest, type ReplayResult } from './replay.ts';
export { deadEvents, pendingByTarget, type DeadEvent, type DeadFilter, type TargetBacklog } from './queries.ts';
export { createEmfMetrics, noopMetrics, type OutboxMetrics } from './metrics.ts';
export { backoffMs, deliverySettingsFor, type DeliverySettings } from './settings.ts';
export { HEADER_EVENT_ID, HEADER_EVENT_TYPE, type OutRecord, type Publisher, type PublishResult } from './types.ts';
