// Direct imports, not the barrels: a Lambda bundle then carries only what its role uses.
import { archiveProcState } from '../pipeline/procArchive.ts';
import { sweepDeliveredEvents } from '../outbox/retention.ts';
import { historySweepIfDue } from '../flights/history.ts';
import { backfillSweep, reconcileBackfill } from '../pipeline/backfill.ts';
import { MAILBOX_CHANNEL, pollOnce } from '../pipeline/poller.ts';
import { INBOX_CHANNEL } from '../pipeline/procState.ts';
import { GROUPS_PER_STEP, pumpOnce } from '../pipeline/pump.ts';
import { rescanOnce } from '../pipeline/rescan.ts';
import { expireRequests } from '../requests/send.ts';
import { reconcileRequests } from '../requests/reconcile.ts';
import { type PipelineGauges, readGauges } from '../observability/metrics.ts';
import type { AppContext } from '../app/context.ts';
import { archiveConsumed, oldestInFlightEvent } from '../txmsg/archive.ts';
import { checkBackRunner } from '../txmsg/checkBack.ts';
import { emitDeadLetter, reportDeadLetters } from '../txmsg/dead.ts';
import { redeliverOnce } from '../txmsg/redeliver.ts';
import type { ScheduledRole } from '../app/catalogue.ts';
import type { RoleFactory, RoleSpec } from '../app/role.ts';

export function pumpRole(ctx: AppContext): RoleSpec {
  return {
    role: 'pump' satisfies ScheduledRole,
    wakeOn: [INBOX_CHANNEL],
    async step() {
      const r = await pumpOnce(ctx, { maxGroups: GROUPS_PER_STEP });
      // Drained: rest until the next wake-up (one that came during the step starts the next at once).
      if (r.kind === 'processed') return { busy: !r.drained };
      if (r.kind === 'waiting') return { busy: false, restMs: r.untilMs - ctx.clock.now().getTime() };
      if (r.kind === 'paused') return { busy: false, paused: true };
      return { busy: false };
    },
  };
}

/** How soon the poller looks again at a gap it is still waiting for (capped by the grace itself). */
const GAP_RECHECK_MS = 100;

export function pollerRole(ctx: AppContext): RoleSpec {
  return {
    role: 'poller' satisfies ScheduledRole,
    wakeOn: [MAILBOX_CHANNEL],
    async step() {
      const r = await pollOnce(ctx);
      // A full read means more may be waiting: poll again at once. A gap still waited for is
      // re-checked often, so a late commit is picked up soon after it lands.
      if (r.more) return { busy: true };
      return { busy: false, restMs: r.waiting > 0 ? Math.min(GAP_RECHECK_MS, ctx.config.pipeline.gapGraceMs) : undefined };
    },
  };
}

/**
 * A maintenance task. `run` is told when its share of the step ends (performance.now()) and, in
 * Lambda, when the invocation does; a task that waits on others (the check-back) stops there.
 * `drain`: what must be waited for before the invocation ends (work left running beside the step).
 */
export type SweepTask = {
  name: string;
  everyMs: number;
  run: (ctx: AppContext, share: SweepShare) => Promise<unknown>;
  drain?: () => Promise<unknown>;
};
export interface SweepShare {
  until: number;
  callsEnd?: number;
}

/** The time one sweep step shares among its due tasks: short enough that each task comes round every few seconds. */
export const SWEEP_STEP_MS = 5_000;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/**
 * Maintenance tasks: never on the message path, each at its own cadence, each bounded per run
 * (by count, and the check-back by its share of the step's time).
 * With a gauge sink (Lambda), also the alarms' pipeline gauges once a minute.
 */
export function defaultSweepTasks(ctx: AppContext, gauges?: (g: PipelineGauges) => void): SweepTask[] {
  const { lifecycle } = ctx.config;
  const checkBack = checkBackRunner(ctx);
  return [
    { name: 'backfill', everyMs: SECOND, run: (c) => backfillSweep(c) },
    { name: 'backfill-reconcile', everyMs: 30 * SECOND, run: (c) => reconcileBackfill(c) },
    { name: 'mailbox-rescan', everyMs: 10 * SECOND, run: (c) => rescanOnce(c) },
    { name: 'tx-redelivery', everyMs: SECOND, run: (c) => redeliverOnce(c) },
    { name: 'tx-check-back', everyMs: SECOND, run: (_c, share) => checkBack.run(share), drain: () => checkBack.drain() },
    // The metric only where metrics are read (with the gauges); the log line everywhere.
    { name: 'tx-dead-letters', everyMs: SECOND, run: (c) => reportDeadLetters(c, gauges ? emitDeadLetter : undefined) },
    // Compensation first: a request whose write was never confirmed is looked for in COUTMSGS.
    { name: 'request-reconcile', everyMs: 2 * SECOND, run: (c) => reconcileRequests(c) },
    { name: 'request-expiry', everyMs: 10 * SECOND, run: (c) => expireRequests(c) },
    { name: 'flight-history', everyMs: MINUTE, run: (c) => historySweepIfDue(c) },
    {
      name: 'proc-archive',
      everyMs: HOUR,
      run: (c) => archiveProcState(c.db, { now: c.clock.now(), retentionDays: lifecycle.procRetentionDays }),
    },
    {
      name: 'event-retention',
      everyMs: HOUR,
      run: async (c, share) =>
        sweepDeliveredEvents(c.db, {
          now: c.clock.now(),
          retentionDays: lifecycle.eventRetentionDays,
          keepFrom: await oldestInFlightEvent(c.db),
          until: share.until,
          log: c.log,
        }),
    },
    { name: 'tx-archive', everyMs: HOUR, run: (c) => archiveConsumed(c) },
    // The alarms' pipeline gauges; in the twin nobody reads EMF (no sink), so they stay off its
    // console. A long sweep invocation emits them every minute; sweepRole's flush at every start and end.
    ...(gauges ? [{ name: 'metrics', everyMs: MINUTE, run: (c: AppContext) => reportPipelineGauges(c, gauges) }] : []),
  ];
}

async function reportPipelineGauges(c: Pick<AppContext, 'db' | 'clock'>, gauges: (g: PipelineGauges) => void): Promise<void> {
  gauges(await readGauges(c.db, c.clock.now(), MINUTE));
}

/** `gauges`: where the pipeline gauges go at the start and end of every invocation (Lambda only). */
export function sweepRole(
  ctx: AppContext,
  tasks: SweepTask[] = defaultSweepTasks(ctx),
  options: { gauges?: (g: PipelineGauges) => void } = {},
): RoleSpec {
  const lastRun = new Map<string, number>();
  const { gauges } = options;
  return {
    role: 'sweep' satisfies ScheduledRole,
    // The end of an invocation waits for what its tasks left running (check-back calls, which
    // never outlive it), then reports the gauges.
    async flush() {
      await Promise.all(tasks.map(async (t) => t.drain?.()));
      if (gauges) await reportPipelineGauges(ctx, gauges);
    },
    async step(budget) {
      const now = ctx.clock.now().getTime();
      const due = tasks.filter((t) => now - (lastRun.get(t.name) ?? Number.NEGATIVE_INFINITY) >= t.everyMs);
      const started = performance.now();
      const callsEnd = budget && Number.isFinite(budget.remainingMs) ? started + budget.remainingMs : undefined;
      const stepEnd = Math.min(started + SWEEP_STEP_MS, callsEnd ?? Number.POSITIVE_INFINITY);
      for (const [i, t] of due.entries()) {
        lastRun.set(t.name, now);
        // An equal share of what is left: time a task did not use goes to the ones after it.
        const until = performance.now() + Math.max(0, stepEnd - performance.now()) / (due.length - i);
        try {
          await t.run(ctx, { until, callsEnd });
        } catch (err) {
          ctx.log.error('sweep task failed', { task: t.name, error: err as Error });
        }
      }
      return { busy: false, restMs: Math.min(...tasks.map((t) => t.everyMs)) };
    },
  };
}

/** The sweep as the catalogue runs it: the default tasks, the pipeline gauges to the sink if it takes them. */
export const scheduledSweepRole: RoleFactory = (ctx, ports) => {
  const gauges = ports.metrics.pipelineGauges;
  return sweepRole(ctx, defaultSweepTasks(ctx, gauges), { gauges });
};
