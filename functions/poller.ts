import { roleHandler } from '../lib/jobs/coldStart.ts';
import { pollerRole } from '../lib/jobs/roles.ts';

/** The poller's Lambda entry: its step and settings are its entry in lib/app/catalogue.ts. */
export const handler = roleHandler('poller', pollerRole);
