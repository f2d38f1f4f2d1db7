import type { RoleFactory, RolePorts, RoleSpec } from './role.ts';
import { ROLE_CATALOGUE, type ScheduledRole } from './catalogue.ts';
import type { AppContext } from './context.ts';

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
