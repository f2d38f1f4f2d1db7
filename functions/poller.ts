import { scheduledHandler } from '../lib/jobs/coldStart.ts';
import { pollerRole } from '../lib/jobs/roles.ts';

/** EventBridge Scheduler → mailbox poller loop (watermark + look-back, idempotent enqueue). */
export const handler = scheduledHandler(pollerRole);
