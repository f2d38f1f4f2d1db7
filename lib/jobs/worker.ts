import type { AppContext } from '../app/context.ts';
import type { StepBudget, StepResult } from '../app/role.ts';
import { tryRoleLock } from './roleLock.ts';

// The role contract lives with the context, where a domain that defines a role can import it.

export interface WorkerOptions {
  role: string;
  /** Told the time left in the invocation (absent when called outside runWorker, e.g. in tests). */
  step: (budget?: StepBudget) => Promise<StepResult>;
  /** NOTIFY channels that wake the worker early. */
  wakeOn?: string[];
  /** Stop when this many ms have passed (Lambda: remaining time less a margin). Infinity in the twin. */
  budgetMs?: number;
  signal?: AbortSignal;
  /**
   * How long past the budget a step still running is waited for before the worker abandons it
   * (releases the lock and returns). Default: forever (the twin). Lambda: what is left of the stop
   * margin less the time to release and return.
   */
  stepGraceMs?: number;
  /** Skip the advisory lock (only for roles that are safe to run concurrently). */
  unlocked?: boolean;
  /** Switched off (MSGX_DISABLED_ROLES): return at once, without the lock or a step. */
  disabled?: boolean;
  /**
   * Start the successor this long before the budget ends (Lambda: an async invoke of the same
   * function), so the role has no gap until the next schedule. Called once, only by the lock holder.
   */
  handover?: { leadMs: number; start: () => Promise<void> };
  /** Wait up to this long for a lock that is held (a successor waiting for its predecessor's end). */
  lockWaitMs?: number;
}

export interface WorkerSummary {
  role: string;
  acquired: boolean;
  steps: number;
  busySteps: number;
  /** Steps that did nothing because the pipeline is paused. */
  pausedSteps: number;
  errors: number;
  /** `step-overran`: a step was still running when the budget ran out; the worker let go of it. */
  /** `disabled`: the role is switched off (MSGX_DISABLED_ROLES) and did not run. */
  stoppedBy: 'budget' | 'signal' | 'lock-lost' | 'not-acquired' | 'step-overran' | 'disabled';
  /** A successor was started before the budget ended. */
  handedOver?: boolean;
}

/** How often a successor asks for its predecessor's lock while it waits. */
const LOCK_WAIT_POLL_MS = 100;

const OVERRAN = Symbol('overran');

/**
 * Runs a role in a loop until its budget is spent or it is told to stop: take the role's lock
 * (a second instance exits at once), step, rest until woken by NOTIFY or the poll interval,
 * release the lock in finally. Errors of a step are logged and the loop goes on after a rest;
 * a lost lock session ends the loop at once (another instance may take over).
 */
export async function runWorker(ctx: Pick<AppContext, 'db' | 'config' | 'clock' | 'log'>, o: WorkerOptions): Promise<WorkerSummary> {
  const summary: WorkerSummary = { role: o.role, acquired: false, steps: 0, busySteps: 0, pausedSteps: 0, errors: 0, stoppedBy: 'budget' };
  if (o.disabled) return { ...summary, stoppedBy: 'disabled' };
  // The budget counts from the invocation's start: time spent waiting for the lock is spent.
  const started = Date.now();
  const budget = o.budgetMs ?? Number.POSITIVE_INFINITY;
  const lock = o.unlocked ? null : await acquire(ctx, o.role, Math.min(o.lockWaitMs ?? 0, budget), o.signal);
  if (!o.unlocked && !lock) return { ...summary, stoppedBy: 'not-acquired' };
  summary.acquired = true;
  const handoverAt = o.handover ? budget - o.handover.leadMs : Number.POSITIVE_INFINITY;
  const handOver = () => {
    if (summary.handedOver || !o.handover || Date.now() - started < handoverAt) return;
    summary.handedOver = true;
    // Not awaited: the successor waits for this lock, and a failed start leaves the schedule to restart the chain.
    o.handover.start().catch((err) => ctx.log.warn('could not start a successor; the schedule will', { role: o.role, error: String(err) }));
  };
  let wake = new AbortController();
  const unlisten: (() => Promise<void>)[] = [];
  // The lock is checked while the worker rests, so a wake-up does not wait for that round trip: at
  // the wake the check has answered since the last step, and a session lost after it has said so
  // itself (its socket closed).
  let checkedAtRest: Promise<void> | null = null;
  try {
    // Listening starts once the lock is held: a wake-up may then count on this worker doing the work.
    for (const channel of o.wakeOn ?? []) unlisten.push(await ctx.db.listen(channel, () => wake.abort(), { holdsRoleLock: lock !== null }));
    while (!o.signal?.aborted && Date.now() - started < budget) {
      handOver();
      if (lock) {
        try {
          await (checkedAtRest && !lock.lost() ? checkedAtRest : lock.check());
          checkedAtRest = null;
        } catch {
          summary.stoppedBy = 'lock-lost';
          ctx.log.warn('role lock session lost; stopping', { role: o.role });
          break;
        }
      }
      let rest = ctx.config.pipeline.pollIntervalMs;
      summary.steps++;
      const remainingMs = budget - (Date.now() - started);
      try {
        const r = await withinBudget(ctx, o.step({ remainingMs }), remainingMs + (o.stepGraceMs ?? Number.POSITIVE_INFINITY));
        if (r === OVERRAN) {
          // Lambda would kill the run mid-step and skip `finally`; stop waiting instead, release
          // the lock now. The abandoned statement ends by its statement_timeout on the server.
          summary.stoppedBy = 'step-overran';
          ctx.log.warn('step still running when the budget ran out; stopping', { role: o.role, remainingMs });
          break;
        }
        if (r.paused) summary.pausedSteps++;
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
      if (!summary.handedOver) rest = Math.max(0, Math.min(rest, handoverAt - (Date.now() - started)));
      checkedAtRest = null;
      if (wake.signal.aborted) wake = new AbortController();
      else {
        if (lock) (checkedAtRest = lock.check()).catch(() => {});
        await ctx.clock.sleep(rest, anySignal([wake.signal, o.signal]));
      }
      if (wake.signal.aborted) wake = new AbortController();
    }
    if (o.signal?.aborted) summary.stoppedBy = 'signal';
  } finally {
    for (const u of unlisten) await u().catch(() => {});
    await lock?.release();
  }
  return summary;
}

/** The role's lock, asked for again every LOCK_WAIT_POLL_MS for up to `waitMs` while another holds it. */
async function acquire(ctx: Pick<AppContext, 'db' | 'clock'>, role: string, waitMs: number, signal?: AbortSignal) {
  const until = Date.now() + waitMs;
  for (;;) {
    const lock = await tryRoleLock(ctx.db, role);
    if (lock || Date.now() >= until || signal?.aborted) return lock;
    await ctx.clock.sleep(Math.min(LOCK_WAIT_POLL_MS, until - Date.now()), signal);
  }
}

/** The step's result, or OVERRAN once `ms` have passed (an infinite budget waits forever). */
async function withinBudget<T>(ctx: Pick<AppContext, 'clock'>, step: Promise<T>, ms: number): Promise<T | typeof OVERRAN> {
  if (!Number.isFinite(ms)) return step;
  const stop = new AbortController();
  // An abandoned step may still fail later; that must not become an unhandled rejection.
  step.catch(() => {});
  try {
    return await Promise.race([step, ctx.clock.sleep(Math.max(0, ms), stop.signal).then((): typeof OVERRAN => OVERRAN)]);
  } finally {
    stop.abort();
  }
}

function anySignal(signals: (AbortSignal | undefined)[]): AbortSignal {
  const present = signals.filter((s): s is AbortSignal => !!s);
  return present.length === 1 ? present[0]! : AbortSignal.any(present);
}
