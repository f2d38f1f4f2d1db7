import { scheduledHandler } from '../lib/jobs/coldStart.ts';
import { pumpRole } from '../lib/jobs/roles.ts';

/** EventBridge Scheduler (and the ingress's kick) → the FIFO pump loop. */
export const handler = scheduledHandler(pumpRole);
