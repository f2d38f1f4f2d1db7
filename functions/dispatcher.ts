import { scheduledHandler } from '../lib/jobs/coldStart.ts';
import { dispatcherRole } from '../lib/jobs/roles.ts';
import { buildPublishers } from '../lib/outbox/publishers/index.ts';
import { createEmfMetrics } from '../lib/outbox/metrics.ts';

/** EventBridge Scheduler → outbox relay loop to MSK and webhooks. Publishers live per cold start. */
export const handler = scheduledHandler((ctx) =>
  dispatcherRole(ctx, buildPublishers(ctx.config, { log: ctx.log, clock: ctx.clock }), { metrics: createEmfMetrics() }),
);
