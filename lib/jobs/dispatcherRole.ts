import { buildExactlyOnce, buildPublishers, closePublishers } from '../outbox/publishers/build.ts';
import type { RoleFactory } from '../app/role.ts';
import { dispatcherRole } from './roles.ts';

// A module of its own: the publishers bring the Kafka client, which only the dispatcher's bundle
// should carry (kafkajs's module has side effects, so esbuild keeps whatever imports it).

/**
 * The dispatcher as the catalogue runs it (Lambda, twin, fault child alike): publishers built once
 * per process from the config and closed at its end, counts and gauges to the metrics sink. With
 * exactly once on (real brokers, the log relay), Kafka is written through one transactional
 * producer per target instead of the plain one.
 */
export const scheduledDispatcherRole: RoleFactory = (ctx, ports) => {
  const publishers = buildPublishers(ctx.config, { log: ctx.log, clock: ctx.clock });
  const exactlyOnce = buildExactlyOnce(ctx.config, { log: ctx.log });
  ports.onClose(async () => {
    await Promise.all([closePublishers(publishers), exactlyOnce?.close()]);
  });
  return dispatcherRole(ctx, publishers, { metrics: ports.metrics.outbox(), ...(exactlyOnce ? { exactlyOnce } : {}) });
};
