import { buildExactlyOnce, buildPublishers, closePublishers } from '../outbox/publishers/build.ts';
import { dispatchOnce, type DispatchOptions } from '../outbox/dispatcher.ts';
import { OUTBOX_CHANNEL } from '../outbox/enqueue.ts';
import { readOutboxGauges } from '../outbox/metrics.ts';
import type { Publisher } from '../outbox/types.ts';
import { txmsgDeadHook, txmsgRetryHook, txmsgSentHook } from '../txmsg/hooks.ts';
import type { AppContext } from '../app/context.ts';
import type { ScheduledRole } from '../app/catalogue.ts';
import type { RoleFactory, RoleSpec } from '../app/role.ts';

// A module of its own: the publishers bring the Kafka client, which only the dispatcher's bundle
// should carry (kafkajs's module has side effects, so esbuild keeps whatever imports it).

/**
 * The dispatcher as the catalogue runs it (Lambda, twin, fault child alike): publishers built once
 * per process from the config and closed at its end, counts and gauges to the metrics sink. With
 * exactly once on (real brokers), Kafka is written through one transactional
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

const BATCHES_PER_ROUND = 40;

/** The relay: delivery rounds over every target; txmsg hears about its events in the same tx. */
export function dispatcherRole(
  ctx: Pick<AppContext, 'db' | 'config' | 'clock' | 'log'>,
  publishers: Publisher[] | ((target: string) => Publisher[]),
  options: DispatchOptions = {},
): RoleSpec {
  return {
    role: 'dispatcher' satisfies ScheduledRole,
    wakeOn: [OUTBOX_CHANNEL],
    async step() {
      // Up to BATCHES_PER_ROUND batches per target per round: later batches skip discovery, as a
      // loop should (a single batch per round halves throughput), and a target that appears
      // meanwhile waits at most one such round (~0.25 s under a full backlog).
      const r = await dispatchOnce(ctx, publishers, {
        onSent: txmsgSentHook,
        onDead: txmsgDeadHook,
        onRetry: txmsgRetryHook,
        hookSources: ['txmsg'],
        maxBatches: BATCHES_PER_ROUND,
        ...options,
      });
      // schd flushes on its own period: come back for it even when nothing else is pending.
      return { busy: r.more, restMs: Math.min(ctx.config.outbox.pollIntervalMs, ctx.config.outbox.schdFlushPeriodMs) };
    },
    flush: options.metrics
      ? async () => {
          const metrics = options.metrics!;
          try {
            metrics.recordGauges(await readOutboxGauges(ctx.db, ctx.clock.now()));
          } finally {
            // The counts go out even when the gauges could not be read.
            metrics.flush();
          }
        }
      : undefined,
  };
}
