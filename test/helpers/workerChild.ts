/**
 * A worker in a child process, so tests can SIGKILL it: `tsx workerChild.ts <mode>` with
 * TEST_PG_URL and TEST_MAILBOX_URL set. mode `hold-lock` takes the pump lock and idles;
 * mode `pump` runs the pump and poller roles of the catalogue (built as every runner builds them,
 * lib/app/localRoles.ts) with the test processors.
 */
import { PgDb } from '../../lib/db/pg.ts';
import { localPorts, localRole } from '../../lib/app/localRoles.ts';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
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
  const ports = localPorts();
  const roles = await Promise.all([localRole(ctx, 'pump', ports), localRole(ctx, 'poller', ports)]);
  process.stdout.write('started\n');
  await Promise.all(roles.map((spec) => runWorker(ctx, spec)));
}
