import type { APIGatewayProxyResult } from 'aws-lambda';
import { buildRouter } from '../lib/http/app.ts';
import { type ApiGatewayEvent, fromApiGateway, toApiGateway } from '../lib/http/apigw.ts';
import { errorResponse } from '../lib/http/router.ts';
import { lambdaContext } from '../lib/jobs/coldStart.ts';
import { asyncInvoker, debouncedKicks } from '../lib/jobs/kick.ts';
import { kafkaHealth } from '../lib/outbox/health.ts';
import { SEND_PATH } from '../lib/constants.ts';

/**
 * API Gateway → the shared router (admin routes for the listed operator roles only). After a
 * stored message, start the poller (the row reaches the pump through it, docs/ordering.md), the
 * pump and the dispatcher if none is live, each at most once per KICK_DEBOUNCE_MS per container.
 */
let router: ReturnType<typeof buildRouter> | undefined;
let kick: ReturnType<typeof debouncedKicks> | undefined;
const invoke = asyncInvoker();
const kickTargets = {
  poller: process.env.MSGX_POLLER_FUNCTION_NAME,
  pump: process.env.MSGX_PUMP_FUNCTION_NAME,
  dispatcher: process.env.MSGX_DISPATCHER_FUNCTION_NAME,
};

export async function handler(event: ApiGatewayEvent): Promise<APIGatewayProxyResult> {
  const ctx = await lambdaContext();
  router ??= buildRouter(kafkaHealth(ctx));
  kick ??= debouncedKicks({
    targets: Object.fromEntries(Object.entries(kickTargets).filter(([, fn]) => fn)),
    disabled: ctx.config.roles.disabled,
    invoke: (fn) => invoke(fn),
  });
  let request: ReturnType<typeof fromApiGateway>;
  try {
    request = fromApiGateway(event, ctx.config.http.operatorPrincipals);
  } catch (err) {
    return toApiGateway(errorResponse(err)); // e.g. a body that is not UTF-8: 400, nothing stored
  }
  const response = await router.handle(request, ctx);
  if (request.path === SEND_PATH && response.status === 200) {
    await kick(ctx.db, (role, err) => ctx.log.warn(`could not start a ${role}; the schedule will`, { error: String(err) }));
  }
  return toApiGateway(response);
}
