/**
 * ONE real msgx role in a child process, so the fault tests can SIGKILL it at any instruction:
 * `node --import tsx test/faults/roleChild.ts <pump|poller|dispatcher|sweep>`.
 *
 * Everything comes from the environment, exactly as a deployed function gets it: MSGX_PG_URL,
 * MSGX_MAILBOX_URL, MSGX_KAFKA_BROKERS, MSGX_TOPIC_MSG / MSGX_TOPIC_SCHD and the MSGX_* tuning the
 * test chooses. The context is the production one (buildContext: real flight processors from
 * defaultRegistry, PostgreSQL through pg, the mailbox through mysql2, Kafka through kafkajs).
 *
 * Like the twin's runForever, the role is restarted after it stops (lock lost because its session
 * was terminated, lock held by a dying predecessor, an unexpected error): a scheduled function
 * would be invoked again by its schedule. Prints `started <role> <pid>` once its context is built.
 *
 * Restarting must not hide a failure: every ERROR-level log line, every role restart other than
 * "lock already held" and every unhandled rejection is also reported on stdout as
 * `failure <json>`, and the harness fails the run on any failure the scenario did not cause
 * (RoleProcesses.unexplainedFailures).
 */
import { loadConfig } from '../../lib/config/config.ts';
import { dispatcherRole, pollerRole, pumpRole, type RoleSpec, sweepRole } from '../../lib/jobs/roles.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { buildPublishers } from '../../lib/outbox/publishers/index.ts';
import { createLogger, type Log } from '../../lib/observability/logger.ts';
import { buildContext } from '../../lib/app/buildContext.ts';

const role = process.argv[2];
if (!['pump', 'poller', 'dispatcher', 'sweep'].includes(role ?? '')) {
  process.stderr.write(`usage: roleChild.ts <pump|poller|dispatcher|sweep>\n`);
  process.exit(2);
}

const config = loadConfig({ ...process.env, MSGX_RUNTIME: 'twin' });

/** One `failure` line on stdout for the harness (stderr keeps the full structured log). */
function reportFailure(message: string, detail: unknown): void {
  const text = detail instanceof Error ? `${detail.name}: ${detail.message}` : JSON.stringify(detail ?? null);
  process.stdout.write(`failure ${JSON.stringify({ role, at: Date.now(), message, detail: text.slice(0, 500) })}\n`);
}
const logger = createLogger('msgx', config.logLevel === 'SILENT' ? 'SILENT' : config.logLevel);
const log: Log = {
  debug: logger.debug.bind(logger),
  info: logger.info.bind(logger),
  warn: logger.warn.bind(logger),
  error: (message: string | object, ...extra: unknown[]) => {
    const first = extra[0] as { error?: unknown } | undefined;
    reportFailure(String(typeof message === 'string' ? message : JSON.stringify(message)), first?.error ?? first);
    (logger.error as (...a: unknown[]) => void)(message, ...extra);
  },
} as Log;
const ctx = await buildContext(config, { poolSize: 4, statementTimeoutMs: 30_000, log });

let spec: RoleSpec;
if (role === 'pump') spec = pumpRole(ctx);
else if (role === 'poller') spec = pollerRole(ctx);
else if (role === 'sweep') spec = sweepRole(ctx);
else spec = dispatcherRole(ctx, buildPublishers(config, { log: ctx.log, clock: ctx.clock }));

process.on('unhandledRejection', (err) => ctx.log.error('unhandled rejection', { role, error: err as Error }));
process.on('uncaughtException', (err) => {
  reportFailure('uncaught exception', err);
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exit(70); // RoleProcesses records it as a crash too
});
process.stdout.write(`started ${role} ${process.pid}\n`);

const stop = new AbortController();
process.on('SIGTERM', () => stop.abort());
while (!stop.signal.aborted) {
  try {
    const s = await runWorker(ctx, { ...spec, signal: stop.signal });
    // A lost lock session only happens when something ended the session (a terminated backend).
    if (s.stoppedBy === 'lock-lost') reportFailure('role lock session lost; restarting', { stoppedBy: s.stoppedBy });
    if (s.stoppedBy !== 'not-acquired') ctx.log.warn('role stopped; restarting', { role, stoppedBy: s.stoppedBy });
  } catch (err) {
    ctx.log.error('role failed; restarting', { role, error: err as Error });
  }
  if (!stop.signal.aborted) await ctx.clock.sleep(Math.min(200, config.pipeline.pollIntervalMs), stop.signal);
}
process.exit(0);
