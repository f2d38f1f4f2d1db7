import { roleHandler } from '../lib/jobs/coldStart.ts';
import { pumpRole } from '../lib/jobs/roles.ts';

/** The pump's Lambda entry: its step and settings are its entry in lib/app/catalogue.ts. */
export const handler = roleHandler('pump', pumpRole);
