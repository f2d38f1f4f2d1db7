import { scheduledHandler } from '../lib/jobs/coldStart.ts';
import { sweepRole } from '../lib/jobs/roles.ts';

/** EventBridge Scheduler → maintenance loop: backfill retries, check-backs, history, leases. */
export const handler = scheduledHandler((ctx) => sweepRole(ctx));
