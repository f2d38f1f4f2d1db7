import { roleHandler } from '../lib/jobs/coldStart.ts';
import { scheduledDispatcherRole } from '../lib/jobs/dispatcherRole.ts';

/** The dispatcher's Lambda entry: its step and settings are its entry in lib/app/catalogue.ts. */
export const handler = roleHandler('dispatcher', scheduledDispatcherRole);
