import type { PipelineGauges } from '../observability/metrics.ts';
import type { OutboxMetrics } from '../outbox/metrics.ts';
import type { AppContext } from './context.ts';
import { ROLE_CATALOGUE, type ScheduledRole } from './catalogue.ts';

/*
 * The contract between a role and what runs it (lib/jobs/worker.ts runWorker, under the role's
 * lock), and the one way every runner builds a catalogue role from it. A domain may import it, as
 * it imports AppContext, so a role can be defined beside its step (docs/architecture.md, "Adding a
 * scheduled role").
 */

/** What one step of a role reports: work done (loop again at once) or how long it may rest. */
export interface StepResult {
  busy: boolean;
  /** Rest at most this long before the next step (capped by the poll interval). */
  restMs?: number;
  /** The step did nothing because the pipeline is paused (lib/pipeline/pause.ts): not a heartbeat. */
  paused?: boolean;
}

/** What a step may know of its invocation: how long it has before the worker stops waiting for it. */
export interface StepBudget {
  remainingMs: number;
}

/** A role: one step that runWorker loops under the role's advisory lock. */
export interface RoleSpec {
  /** The catalogue name: the lock key, the metric dimension, the function and schedule. */
  role: string;
  /** Told the time left in the invocation (absent when called outside runWorker, e.g. in tests). */
  step: (budget?: StepBudget) => Promise<StepResult>;
  /** NOTIFY channels that wake the worker early. */
  wakeOn?: string[];
  /** Skip the advisory lock (only for roles that are safe to run concurrently). */
  unlocked?: boolean;
  /** Switched off (MSGX_DISABLED_ROLES): a run ends at once, taking no lock and doing nothing. */
  disabled?: boolean;
  /**
   * Emits what the role measured and the gauges it knows. The Lambda handler calls it at the
   * start and before the end of every invocation (metrics arrive in the minute they
   * describe, and an idle or stuck role still reports); the twin has no use for it.
   */
  flush?: () => Promise<void>;
}

/** Heartbeat, RoleLockTaken and Paused of one run of a role (what they mean: lib/jobs/roleMetrics.ts). */
export type RoleMetricsSink = (role: string, values: RoleRunValues) => void;

export interface RoleRunValues {
  Heartbeat: number;
  RoleLockTaken: number;
  /** Present (1) only for a run that found the pipeline paused. */
  Paused?: number;
  /** Present (1) only for a run of a role switched off (MSGX_DISABLED_ROLES): it did nothing. */
  Disabled?: number;
}

/**
 * Where a role's measurements go: CloudWatch EMF in Lambda (lib/app/metrics.ts `emfMetricsSink`),
 * nowhere in the twin and the fault child (`localMetricsSink`), a recorder in tests.
 */
export interface MetricsSink {
  /** Heartbeat, RoleLockTaken (and Paused) after each run of a role (the Lambda handler calls it). */
  roleRun: RoleMetricsSink;
  /** A fresh set of the relay's counters and gauges (one per process). */
  outbox(): OutboxMetrics;
  /** The pipeline gauges the alarms watch; absent where nothing reads them. */
  pipelineGauges?: (g: PipelineGauges) => void;
}

/** What the process running a role gives it besides the context. */
export interface RolePorts {
  metrics: MetricsSink;
  /** Register what the role opened for the life of the process (publishers); closed at its end. */
  onClose(close: () => Promise<void>): void;
}

/**
 * How a role is built from its catalogue entry (lib/app/catalogue.ts `step`): once per process —
 * a Lambda cold start, the twin's start, a fault child — from the context and the process's ports.
 */
export type RoleFactory = (ctx: AppContext, ports: RolePorts) => RoleSpec;

/**
 * A catalogue role built for this process, the one way every runner builds it (the Lambda handler,
 * the twin, the fault child): the factory named by the catalogue entry, given the context and the
 * process's ports, under the entry's lock setting.
 */
export function catalogueRole(ctx: AppContext, name: ScheduledRole, factory: RoleFactory, ports: RolePorts): RoleSpec {
  const spec = factory(ctx, ports);
  // The name is the lock key, the metric dimension and the schedule: a factory filed under the
  // wrong name would take another role's lock.
  if (spec.role !== name) throw new Error(`catalogue role ${name}: its factory built role ${JSON.stringify(spec.role)}`);
  const locked = ROLE_CATALOGUE[name].lock ? spec : { ...spec, unlocked: true };
  // Switched off for this deployment: whoever invokes it (a stray schedule, a kick) gets a run
  // that ends at once.
  return (ctx.config.roles.disabled as readonly string[]).includes(name) ? { ...locked, disabled: true } : locked;
}
