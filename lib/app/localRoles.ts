import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { catalogueRole, type RoleFactory, type RolePorts, type RoleSpec } from './role.ts';
import { runWorker, type WorkerSummary } from '../jobs/worker.ts';
import { ROLE_CATALOGUE, type ScheduledRole } from './catalogue.ts';
import type { AppContext } from './context.ts';
import { localMetricsSink } from './metrics.ts';

/*
 * Roles in a long-lived process: the twin runs every catalogue role, a fault child one. Never part
 * of a Lambda bundle: it loads a role's module by the path in the catalogue (a Lambda entry imports
 * it statically instead, see infra-cdk/bundle.ts).
 */

const REPO_ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

/** The factory a catalogue entry names, loaded from its module. */
export async function loadRoleFactory(name: ScheduledRole): Promise<RoleFactory> {
  const { module, export: exported } = ROLE_CATALOGUE[name].step;
  const loaded = (await import(pathToFileURL(resolve(REPO_ROOT, module)).href)) as Record<string, unknown>;
  const factory = loaded[exported];
  if (typeof factory !== 'function')
    throw new Error(`lib/app/catalogue.ts: role ${name} names ${module} export ${exported}, which is not a function`);
  return factory as RoleFactory;
}

/** Ports of a long-lived process: no metrics, and what the roles opened closed by `close()`. */
export function localPorts(): RolePorts & { close(): Promise<void> } {
  const closers: (() => Promise<void>)[] = [];
  return {
    metrics: localMetricsSink,
    onClose: (close) => void closers.push(close),
    close: async () => {
      await Promise.allSettled(closers.splice(0).map((c) => c()));
    },
  };
}

/** A catalogue role built for this process (see catalogueRole). */
export async function localRole(ctx: AppContext, name: ScheduledRole, ports: RolePorts): Promise<RoleSpec> {
  return catalogueRole(ctx, name, await loadRoleFactory(name), ports);
}

export interface SuperviseOptions {
  /** Rest between a run's end and the next attempt (default: the poll interval). */
  restartAfterMs?: number;
  /** Told how every run ended (the fault child reports lost lock sessions as failures). */
  onRunEnd?: (summary: WorkerSummary) => void;
}

/**
 * The one restart loop (the twin, the fault child): run the role until told to stop, and start it
 * again after it stops — its lock held by another process or a dying predecessor, its lock session
 * lost, an unexpected error — as a schedule would invoke the function again.
 */
export async function superviseRole(ctx: AppContext, spec: RoleSpec, signal: AbortSignal, o: SuperviseOptions = {}): Promise<void> {
  while (!signal.aborted) {
    try {
      // Not `o.onRunEnd?.(await runWorker(…))`: without a callback that would skip the run itself.
      const summary = await runWorker(ctx, { ...spec, signal });
      o.onRunEnd?.(summary);
    } catch (err) {
      ctx.log.error('role failed; restarting', { role: spec.role, error: err as Error });
    }
    if (!signal.aborted) await ctx.clock.sleep(o.restartAfterMs ?? ctx.config.pipeline.pollIntervalMs, signal);
  }
}
