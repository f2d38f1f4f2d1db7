/**
 * A worker in a child process, so tests can SIGKILL it: `tsx roleChild.ts <mode>` with
 * TEST_PG_URL and TEST_MAILBOX_URL set. mode `hold-lock` takes the pump lock and idles;
 * mode `pump` runs the pump and poller roles with the test processors.
 */
import { PgDb } from '../../lib/db/pg.ts';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
import { pollerRole, pumpRole } from '../../lib/jobs/roles.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';
import { systemClock } from '../../lib/shared/clock.ts';
import { makeContext } from './pipeline.ts';
import { testRegistry } from './testProcessors.ts';

const mode = process.argv[2];
const db = new PgDb(process.env.TEST_PG_URL!, { max: 4 });
const mailbox = new MysqlMailbox(process.env.TEST_MAILBOX_URL!);

if (mode === 'hold-lock') {
  const lock = await tryRoleLock(db, 'pump');
  process.stdout.write(lock ? 'locked\n' : 'busy\n');
  setInterval(() => {}, 1000);
} else if (mode === 'pump') {
  const ctx = makeContext({
    db,
    mailbox,
    clock: systemClock,
    registry: testRegistry(),
    env: { MSGX_POLL_INTERVAL_MS: '50', MSGX_GROUP_COMMIT: process.env.TEST_GROUP ?? '10' },
  });
  process.stdout.write('started\n');
  await Promise.all([runWorker(ctx, pumpRole(ctx)), runWorker(ctx, pollerRole(ctx))]);
}
