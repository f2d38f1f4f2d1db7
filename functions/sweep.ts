import { roleHandler } from '../lib/jobs/coldStart.ts';
import { scheduledSweepRole } from '../lib/jobs/roles.ts';

/** The sweep's Lambda entry: its step and settings are its entry in lib/app/catalogue.ts. */
export const handler = roleHandler('sweep', scheduledSweepRole);
