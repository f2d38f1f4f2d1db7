import type { AppContext } from '../shared/context.ts';
import { tryRoleLock } from './roleLock.ts';

/** What one step of a role reports: work done (loop again at once) or how long it may rest. */
export interface StepResult {
  busy: boolean;
  /** Rest at most this long before the next step (capped by the poll interval). */
  restMs?: number;
}

export interface WorkerOptions {
  role: string;
  step: () => Promise<StepResult>;
  /** NOTIFY channels that wake the worker early. */
  wakeOn?: string[];
  /** Stop when this many ms have passed (Lambda: remaining time less a margin). Infinity in the twin. */
  budgetMs?: number;
  signal?: AbortSignal;
  /** Skip the advisory lock (only for roles that are safe to run concurrently). */
  unlocked?: boolean;
}

export interface WorkerSummary {
  role: string;
  acquired: boolean;
  steps: number;
  busySteps: number;
  errors: number;
  stoppedBy: 'budget' | 'signal' | 'lock-lost' | 'not-acquired';
}

/**
 * Runs a role in a loop until its budget is spent or it is told to stop: take the role's lock
 * (a second instance exits at once), step, rest until woken by NOTIFY or the poll interval,
 * release the lock in finally. Errors of a step are logged and the loop goes on after a rest;
 * a lost lock session ends the loop at once (another instance may take over).
 */
export async function runWorker(ctx: Pick<AppContext, 'db' | 'config' | 'clock' | 'log'>, o: WorkerOptions): Promise<WorkerSummary> {
  const summary: WorkerSummary = { role: o.role, acquired: false, steps: 0, busySteps: 0, errors: 0, stoppedBy: 'budget' };
  const lock = o.unlocked ? null : await tryRoleLock(ctx.db, o.role);
  if (!o.unlocked && !lock) return { ...summary, stoppedBy: 'not-acquired' };
  summary.acquired = true;
  const started = Date.now();
  const budget = o.budgetMs ?? Number.POSITIVE_INFINITY;
  let wake = new AbortController();
  const unlisten: (() => Promise<void>)[] = [];
  try {
    for (const channel of o.wakeOn ?? []) unlisten.push(await ctx.db.listen(channel, () => wake.abort()));
    while (!o.signal?.aborted && Date.now() - started < budget) {
      if (lock) {
        try {
          await lock.check();
        } catch {
          summary.stoppedBy = 'lock-lost';
          ctx.log.warn('role lock session lost; stopping', { role: o.role });
          break;
        }
      }
      let rest = ctx.config.pipeline.pollIntervalMs;
      summary.steps++;
      try {
        const r = await o.step();
        if (r.busy) {
          summary.busySteps++;
          continue;
        }
        if (r.restMs !== undefined) rest = Math.max(0, Math.min(rest, r.restMs));
      } catch (err) {
        summary.errors++;
        ctx.log.error('worker step failed', { role: o.role, error: err as Error });
      }
      rest = Math.min(rest, budget - (Date.now() - started));
      if (wake.signal.aborted) wake = new AbortController();
      else await ctx.clock.sleep(rest, anySignal([wake.signal, o.signal]));
      if (wake.signal.aborted) wake = new AbortController();
    }
    if (o.signal?.aborted) summary.stoppedBy = 'signal';
  } finally {
    for (const u of unlisten) await u().catch(() => {});
    await lock?.release();
  }
  return summary;
}

function anySignal(signals: (AbortSignal | undefined)[]): AbortSignal {
  const present = signals.filter((s): s is AbortSignal => !!s);
  return present.length === 1 ? present[0]! : AbortSignal.any(present);
}
