import type { HealthCheck } from '../http/health.ts';
import { kafkaHealth } from '../outbox/health.ts';
import { describeMissing, missingTopics } from '../outbox/missingTopics.ts';
import { listedTxTopics } from '../txmsg/topics.ts';
import { ensureTopics } from '../outbox/topics.ts';
import type { AppContext } from '../app/context.ts';
import { SCHEDULED_ROLES } from '../app/catalogue.ts';
import { reaching } from '../app/serviceErrors.ts';
import { localPorts, localRole, superviseRole } from '../app/localRoles.ts';

/**
 * Runs every role of the catalogue continuously in this process. A role whose lock another
 * process holds (a second twin on the same database) keeps trying at its poll interval.
 */
export async function startRoles(
  ctx: AppContext,
  signal: AbortSignal,
): Promise<{ done: Promise<unknown>; close: () => Promise<void>; healthChecks: Record<string, HealthCheck> }> {
  const listed = listedTxTopics(ctx.config);
  const brokers = ctx.config.kafka.brokers.join(',');
  const topics = await reaching('MSGX_KAFKA_BROKERS', brokers, () => ensureTopics(ctx.config, listed, { log: ctx.log }));
  if (topics.created.length) ctx.log.info('topics created', { topics: topics.created });
  for (const w of topics.warnings) ctx.log.warn(w);
  await warnMissingTopics(ctx);
  const ports = localPorts();
  const off = ctx.config.roles.disabled as readonly string[];
  const running = SCHEDULED_ROLES.filter((name) => !off.includes(name));
  ctx.log.info('roles', { running, switchedOff: SCHEDULED_ROLES.filter((name) => off.includes(name)) });
  if (off.length) ctx.log.warn(`roles switched off by MSGX_DISABLED_ROLES: ${off.join(', ')} (they do not run in this process)`);
  const specs = await Promise.all(running.map((name) => localRole(ctx, name, ports)));
  const done = Promise.all(specs.map((spec) => superviseRole(ctx, spec, signal)));
  return { done, close: ports.close, healthChecks: kafkaHealth(ctx) };
}

/** Outbox targets whose topic the cluster lacks would only be retried until DEAD: say so at start. */
async function warnMissingTopics(ctx: AppContext): Promise<void> {
  try {
    const missing = await missingTopics(ctx.config, ctx.db);
    if (missing.length)
      ctx.log.warn(`Kafka topics missing (create them, or their events go DEAD after their retries): ${describeMissing(missing)}`, {
        missingTopics: missing,
      });
  } catch (err) {
    ctx.log.warn('could not check the Kafka topics at start', { error: String(err) });
  }
}
