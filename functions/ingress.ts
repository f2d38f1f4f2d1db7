import type { APIGatewayProxyResult } from 'aws-lambda';
import { buildRouter } from '../lib/http/app.ts';
import { type ApiGatewayEvent, fromApiGateway, toApiGateway } from '../lib/http/apigw.ts';
import { errorResponse } from '../lib/http/router.ts';
import { lambdaContext } from '../lib/jobs/coldStart.ts';
import { asyncInvoker, kickPumpIfIdle } from '../lib/jobs/kick.ts';
import { kafkaHealth } from '../lib/outbox/health.ts';
import { SEND_PATH } from '../lib/constants.ts';

/** API Gateway → the shared router (admin routes for the listed operator roles only). After a stored message, start a poller and a pump if none is live. */
let router: ReturnType<typeof buildRouter> | undefined;
const invoke = asyncInvoker();
const pumpFunction = process.env.MSGX_PUMP_FUNCTION_NAME;
// The stored row reaches the pump through the poller (docs/ordering.md): both must be running.
const pollerFunction = process.env.MSGX_POLLER_FUNCTION_NAME;

export async function handler(event: ApiGatewayEvent): Promise<APIGatewayProxyResult> {
  const ctx = await lambdaContext();
  router ??= buildRouter(kafkaHealth(ctx));
  let request: ReturnType<typeof fromApiGateway>;
  try {
    request = fromApiGateway(event, ctx.config.http.operatorPrincipals);
  } catch (err) {
    return toApiGateway(errorResponse(err)); // e.g. a body that is not UTF-8: 400, nothing stored
  }
  const response = await router.handle(request, ctx);
  if (pumpFunction && request.path === SEND_PATH && response.status === 200) {
    await kickPumpIfIdle(ctx.db, async () => {
      await invoke(pumpFunction);
    }).catch((err) => ctx.log.warn('could not start a pump; the schedule will', { error: String(err) }));
  }
  if (pollerFunction && request.path === SEND_PATH && response.status === 200) {
    await kickPumpIfIdle(
      ctx.db,
      async () => {
        await invoke(pollerFunction);
      },
      'poller',
    ).catch((err) => ctx.log.warn('could not start a poller; the schedule will', { error: String(err) }));
  }
  return toApiGateway(response);
}
