/**
 * ONE real msgx role in a child process, so the fault tests can SIGKILL it at any instruction:
 * `node --import tsx test/faults/roleChild.ts <pump|poller|dispatcher|sweep>` (any role of
 * lib/app/catalogue.ts), built the one way every runner builds it (lib/app/localRoles.ts).
 *
 * Everything comes from the environment, exactly as a deployed function gets it: MSGX_PG_URL,
 * MSGX_MAILBOX_URL, MSGX_KAFKA_BROKERS, MSGX_TOPIC_MSG / MSGX_TOPIC_SCHD and the MSGX_* tuning the
 * test chooses. The context is the production one (buildContext: real flight processors from
 * defaultRegistry, PostgreSQL through pg, the mailbox through mysql2, Kafka through kafkajs).
 *
 * The twin's restart loop (superviseRole) restarts the role after it stops (lock lost because its
 * session was terminated, lock held by a dying predecessor, an unexpected error): a scheduled
 * function would be invoked again by its schedule. Prints `started <role> <pid>` once its context
 * is built.
 *
 * Restarting must not hide a failure: every ERROR-level log line, every role restart other than
 * "lock already held" and every unhandled rejection is also reported on stdout as
 * `failure <json>`, and the harness fails the run on any failure the scenario did not cause
 * (RoleProcesses.unexplainedFailures).
 */
import { loadConfig } from '../../lib/config/config.ts';
import { createLogger, type Log } from '../../lib/observability/logger.ts';
import { buildContext } from '../../lib/app/buildContext.ts';
import { isScheduledRole, SCHEDULED_ROLES } from '../../lib/app/catalogue.ts';
import { localPorts, localRole, superviseRole } from '../../lib/app/localRoles.ts';

const role = process.argv[2] ?? '';
if (!isScheduledRole(role)) {
  process.stderr.write(`usage: roleChild.ts <${SCHEDULED_ROLES.join('|')}>\n`);
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
};
const ctx = await buildContext(config, { poolSize: 4, statementTimeoutMs: 30_000, log });

const spec = await localRole(ctx, role, localPorts());

process.on('unhandledRejection', (err) => ctx.log.error('unhandled rejection', { role, error: err as Error }));
process.on('uncaughtException', (err) => {
  reportFailure('uncaught exception', err);
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exit(70); // RoleProcesses records it as a crash too
});
process.stdout.write(`started ${role} ${process.pid}\n`);

const stop = new AbortController();
process.on('SIGTERM', () => stop.abort());
// An error that stops the role is logged at ERROR by superviseRole, so it is a failure line too.
await superviseRole(ctx, spec, stop.signal, {
  restartAfterMs: Math.min(200, config.pipeline.pollIntervalMs),
  onRunEnd: (s) => {
    // A lost lock session only happens when something ended the session (a terminated backend).
    if (s.stoppedBy === 'lock-lost') reportFailure('role lock session lost; restarting', { stoppedBy: s.stoppedBy });
    if (s.stoppedBy !== 'not-acquired') ctx.log.warn('role stopped; restarting', { role, stoppedBy: s.stoppedBy });
  },
});
process.exit(0);
