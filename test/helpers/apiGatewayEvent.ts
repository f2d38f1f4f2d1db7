import type { APIGatewayProxyEvent } from 'aws-lambda';

/** An API Gateway (REST, proxy) event as Lambda hands it to functions/ingress.ts, with an XML body. */
export const apiGatewayEvent = (method: string, path: string, body: string, caller?: string): APIGatewayProxyEvent =>
  ({
    httpMethod: method,
    path,
    headers: { 'Content-Type': 'application/xml' },
    queryStringParameters: null,
    body,
    isBase64Encoded: false,
    requestContext: { identity: { userArn: caller ?? null, caller: caller ?? null } },
  }) as unknown as APIGatewayProxyEvent;
