import { flightRoutes } from '../flights/routes.ts';
import { pipelineRoutes } from '../pipeline/routes.ts';
import { requestRoutes } from '../requests/routes.ts';
import { txmsgRoutes } from '../txmsg/routes.ts';
import { adminRoutes } from './adminRoutes.ts';
import { consoleRoutes } from './consoleRoutes.ts';
import { type HealthCheck, healthRoute } from './health.ts';
import { Router } from './router.ts';

/** The whole HTTP API, the same behind API Gateway and in the twin. */
export function buildRouter(healthChecks: Record<string, HealthCheck> = {}): Router {
  return new Router([
    healthRoute(healthChecks),
    ...pipelineRoutes,
    ...flightRoutes,
    ...txmsgRoutes,
    ...requestRoutes,
    ...adminRoutes,
    ...consoleRoutes,
  ]);
}
