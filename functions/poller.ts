import { scheduledHandler } from '../lib/jobs/coldStart.ts';
import { pollerRole } from '../lib/jobs/roles.ts';

/** EventBridge Scheduler → mailbox poller loop (mailbox frontier, gaps and holes: docs/ordering.md). */
export const handler = scheduledHandler(pollerRole);
