import type { APIGatewayProxyEvent, APIGatewayProxyEventV2WithIAMAuthorizer } from 'aws-lambda';

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

/**
 * An HTTP API payload 2.0 event as API Gateway sends it for a route with the IAM authorizer:
 * `callerArn` is the SigV4 signer API Gateway verified (absent: an unsigned request, as on a
 * route with another authorizer). A JSON body unless `headers` says otherwise.
 */
export function apiGatewayEventV2(
  method: string,
  path: string,
  o: { body?: string; callerArn?: string; headers?: Record<string, string>; query?: Record<string, string> } = {},
): APIGatewayProxyEventV2WithIAMAuthorizer {
  const account = o.callerArn ? /::(\d{12}):/.exec(o.callerArn)?.[1] : undefined;
  return {
    version: '2.0',
    routeKey: `${method} ${path}`,
    rawPath: path,
    rawQueryString: new URLSearchParams(o.query ?? {}).toString(),
    headers: { 'content-type': 'application/json', ...o.headers },
    ...(o.query ? { queryStringParameters: o.query } : {}),
    requestContext: {
      accountId: '123456789012',
      apiId: 'abcdef1234',
      domainName: 'abcdef1234.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abcdef1234',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '203.0.113.7', userAgent: 'test' },
      requestId: 'req-1',
      routeKey: `${method} ${path}`,
      stage: '$default',
      time: '02/Dec/2026:00:00:00 +0000',
      timeEpoch: 1796169600000,
      ...(o.callerArn
        ? {
            authorizer: {
              iam: {
                accessKey: 'ASIAEXAMPLE',
                accountId: account ?? '123456789012',
                callerId: 'AROAEXAMPLE:session',
                cognitoIdentity: null,
                principalOrgId: null,
                userArn: o.callerArn,
                userId: 'AROAEXAMPLE:session',
              },
            },
          }
        : {}),
    },
    body: o.body,
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2WithIAMAuthorizer;
}
