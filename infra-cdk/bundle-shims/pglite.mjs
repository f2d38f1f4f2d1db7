// Lambda bundles only: the embedded PGlite database is the twin's; a function always has
// MSGX_PG_URL (lib/db/open.ts imports PGlite only without it). Half a megabyte not shipped.
export class PGlite {
  constructor() {
    throw new Error('PGlite is not in the Lambda bundle: functions need MSGX_PG_URL (or MSGX_PG_SECRET_ARN)');
  }
}
