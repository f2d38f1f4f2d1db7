import type { ScheduledRole } from '../../lib/app/catalogue.ts';
import { loadRoleFactory } from '../../lib/app/localRoles.ts';
import { roleHandler } from '../../lib/jobs/coldStart.ts';

const handlers = new Map<ScheduledRole, Promise<ReturnType<typeof roleHandler>>>();

/**
 * The Lambda handler of a catalogue role as its deployed entry builds it (infra-cdk/bundle.ts
 * writes `roleHandler(name, <the factory the catalogue names>)`), one per role as in a warm
 * environment. Here the factory is found by the catalogue's path rather than by the bundler.
 */
export function lambdaRole(name: ScheduledRole): Promise<ReturnType<typeof roleHandler>> {
  let h = handlers.get(name);
  if (!h) handlers.set(name, (h = loadRoleFactory(name).then((factory) => roleHandler(name, factory))));
  return h;
}
