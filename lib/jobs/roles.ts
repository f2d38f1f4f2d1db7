import { backfillSweep, reconcileBackfill } from '../pipeline/backfill.ts';
import { pollOnce } from '../pipeline/poller.ts';
import { INBOX_CHANNEL } from '../pipeline/procState.ts';
import { pumpOnce } from '../pipeline/pump.ts';
import type { AppContext } from '../shared/context.ts';
import type { StepResult, WorkerOptions } from './worker.ts';

/** One step per role; runWorker loops them under the role's lock. */
export type RoleSpec = Pick<WorkerOptions, 'role' | 'wakeOn'> & { step: () => Promise<StepResult> };

export function pumpRole(ctx: AppContext): RoleSpec {
  return {
    role: 'pump',
    wakeOn: [INBOX_CHANNEL],
    async step() {
      const r = await pumpOnce(ctx);
      if (r.kind === 'processed') return { busy: true };
      if (r.kind === 'waiting') return { busy: false, restMs: r.untilMs - ctx.clock.now().getTime() };
      return { busy: false };
    },
  };
}

export function pollerRole(ctx: AppContext): RoleSpec {
  return {
    role: 'poller',
    async step() {
      const r = await pollOnce(ctx);
      // A full batch means more may be waiting: poll again at once.
      return { busy: r.scanned >= ctx.config.pipeline.claimBatch && r.enqueued > 0 };
    },
  };
}

export type SweepTask = { name: string; everyMs: number; run: (ctx: AppContext) => Promise<unknown> };

/** Maintenance: never on the message path, each task at its own cadence, bounded per run. */
export function sweepRole(ctx: AppContext, extra: SweepTask[] = []): RoleSpec {
  const tasks: SweepTask[] = [
    { name: 'backfill', everyMs: 1000, run: (c) => backfillSweep(c) },
    { name: 'backfill-reconcile', everyMs: 30_000, run: (c) => reconcileBackfill(c) },
    ...extra,
  ];
  const lastRun = new Map<string, number>();
  return {
    role: 'sweep',
    async step() {
      const now = ctx.clock.now().getTime();
      for (const t of tasks) {
        if (now - (lastRun.get(t.name) ?? 0) < t.everyMs) continue;
        lastRun.set(t.name, now);
        try {
          await t.run(ctx);
        } catch (err) {
          ctx.log.error('sweep task failed', { task: t.name, error: err as Error });
        }
      }
      return { busy: false };
    },
  };
}
