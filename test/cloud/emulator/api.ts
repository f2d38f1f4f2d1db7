import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type AccessKey, isSigned, verifySigV4 } from '../../helpers/sigv4Verify.ts';
import { listen, type Listening, readBody, sendJson } from './http.ts';

/**
 * A caller's IAM identity, two ways. A request signed with SigV4 is verified as API Gateway
 * verifies it, against the emulated account's access keys (each naming its caller's ARN); a bad
 * signature is refused with 403 whatever else it carries. A test that is not about signing may
 * instead name the principal in this header (removed before the function sees the request). A
 * route with AWS_IAM authorization answers 403 with neither, as API Gateway does for an unsigned
 * request.
 */
export const IAM_PRINCIPAL_HEADER = 'x-emulator-iam-principal';

export interface ApiRoute {
  routeKey: string;
  authorizationType: string;
  integration: { functionArn: string; payloadFormatVersion: '1.0' | '2.0'; timeoutMs: number };
}

export interface ApiInvoke {
  (functionArn: string, event: unknown): Promise<{ ok: boolean; payload: unknown }>;
}

/** Content types API Gateway passes as text; other bodies reach the function base64-encoded. */
const TEXT = /^(text\/|application\/(json|xml|javascript|x-www-form-urlencoded)|[^;]*\+(json|xml))/i;

/**
 * An HTTP API (API Gateway v2) from its AWS::ApiGatewayV2 routes and integrations: real HTTP in,
 * the route chosen as API Gateway chooses it (exact paths before {param}, {proxy+} last; a
 * method before ANY), the integration's payload format (1.0 or 2.0) out to the Lambda function,
 * and the function's answer back. No route: 404 {"message":"Not Found"}; a failed function: 500
 * {"message":"Internal Server Error"}.
 */
export class HttpApi {
  routes: ApiRoute[] = [];
  private server?: Listening;

  constructor(
    readonly apiId: string,
    private readonly o: { account: string; region: string; invoke: ApiInvoke; accessKeys?: readonly AccessKey[] },
  ) {}

  get url(): string {
    return this.server!.url;
  }

  async start(): Promise<void> {
    this.server = await listen((req, res) => {
      this.handle(req, res).catch((err) => sendJson(res, 500, { message: `emulator: ${(err as Error).message}` }));
    });
  }

  async close(): Promise<void> {
    await this.server?.close();
  }

  match(method: string, path: string): { route: ApiRoute; params: Record<string, string>; resource: string } | undefined {
    let best: { route: ApiRoute; params: Record<string, string>; resource: string; score: number } | undefined;
    for (const route of this.routes) {
      const [m, pattern] = route.routeKey === '$default' ? ['ANY', '/{proxy+}'] : route.routeKey.split(' ');
      if (m !== 'ANY' && m !== method) continue;
      const params = matchPath(pattern!, path);
      if (!params) continue;
      const literal = pattern!.split('/').filter((s) => s && !s.startsWith('{')).length;
      const score = (route.routeKey === '$default' ? 0 : 1000) + literal * 10 + (pattern!.includes('+}') ? 0 : 5) + (m === 'ANY' ? 0 : 1);
      if (!best || score > best.score) best = { route, params, resource: pattern!, score };
    }
    return best;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://api');
    const method = (req.method ?? 'GET').toUpperCase();
    const body = await readBody(req);
    const hit = this.match(method, url.pathname);
    if (!hit) return sendJson(res, 404, { message: 'Not Found' });
    let principal = req.headers[IAM_PRINCIPAL_HEADER];
    let accessKey = 'ASIAEMULATEDCALLER00';
    if (hit.route.authorizationType === 'AWS_IAM' && isSigned(req)) {
      const v = verifySigV4({ method, url: req.url ?? '/', headers: req.headers, body }, this.o.accessKeys ?? [], {
        region: this.o.region,
      });
      // API Gateway's words for a signature it cannot verify, with the emulator's reason after them.
      if (!v.ok) return sendJson(res, 403, { message: `Forbidden: ${v.reason}` });
      principal = v.key.principal;
      accessKey = v.key.accessKeyId;
    }
    if (hit.route.authorizationType === 'AWS_IAM' && typeof principal !== 'string') return sendJson(res, 403, { message: 'Forbidden' });
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (k !== IAM_PRINCIPAL_HEADER && v !== undefined) headers[k] = Array.isArray(v) ? v.join(',') : v;
    const text = TEXT.test(headers['content-type'] ?? '') || body.length === 0;
    const request = {
      method,
      url,
      headers,
      body: body.length === 0 ? null : text ? body.toString('utf8') : body.toString('base64'),
      isBase64Encoded: !text,
      params: hit.params,
      resource: hit.resource,
      routeKey: hit.route.routeKey,
      principal: typeof principal === 'string' ? principal : undefined,
      accessKey,
      sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
    };
    const event = hit.route.integration.payloadFormatVersion === '1.0' ? this.eventV1(request) : this.eventV2(request);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), hit.route.integration.timeoutMs)));
    const out = await Promise.race([this.o.invoke(hit.route.integration.functionArn, event), timeout]).finally(() => clearTimeout(timer));
    if (out === 'timeout') return sendJson(res, 503, { message: 'Service Unavailable' });
    if (!out.ok) return sendJson(res, 500, { message: 'Internal Server Error' });
    const r = out.payload as {
      statusCode?: number;
      headers?: Record<string, string>;
      multiValueHeaders?: Record<string, string[]>;
      body?: string;
      isBase64Encoded?: boolean;
    } | null;
    if (hit.route.integration.payloadFormatVersion === '2.0' && (r === null || typeof r !== 'object' || r.statusCode === undefined))
      return sendJson(res, 200, r);
    if (!r || typeof r.statusCode !== 'number') return sendJson(res, 500, { message: 'Internal Server Error' });
    const outHeaders: Record<string, string | string[]> = { ...(r.multiValueHeaders ?? {}), ...(r.headers ?? {}) };
    res.writeHead(r.statusCode, outHeaders);
    res.end(r.body === undefined ? '' : Buffer.from(r.body, r.isBase64Encoded ? 'base64' : 'utf8'));
  }

  private context(_r: Request) {
    const now = Date.now();
    return {
      accountId: this.o.account,
      apiId: this.apiId,
      domainName: `${this.apiId}.execute-api.emulated`,
      domainPrefix: this.apiId,
      requestId: randomUUID(),
      stage: '$default',
      requestTimeEpoch: now,
      requestTime: new Date(now).toUTCString(),
    };
  }

  private eventV1(r: Request) {
    const query = [...r.url.searchParams.keys()].length ? r.url.searchParams : undefined;
    const multi = (entries: [string, string][]) => {
      const out: Record<string, string[]> = {};
      for (const [k, v] of entries) (out[k] ??= []).push(v);
      return out;
    };
    return {
      version: '1.0',
      resource: r.resource,
      path: r.url.pathname,
      httpMethod: r.method,
      headers: r.headers,
      multiValueHeaders: multi(Object.entries(r.headers)),
      queryStringParameters: query ? Object.fromEntries(query) : null,
      multiValueQueryStringParameters: query ? multi([...query]) : null,
      requestContext: {
        ...this.context(r),
        extendedRequestId: randomUUID(),
        httpMethod: r.method,
        path: r.url.pathname,
        protocol: 'HTTP/1.1',
        resourceId: r.routeKey,
        resourcePath: r.resource,
        identity: {
          accessKey: r.principal ? r.accessKey : null,
          accountId: r.principal ? this.o.account : null,
          caller: r.principal ?? null,
          cognitoAuthenticationProvider: null,
          cognitoAuthenticationType: null,
          cognitoIdentityId: null,
          cognitoIdentityPoolId: null,
          principalOrgId: null,
          sourceIp: r.sourceIp,
          user: r.principal ?? null,
          userAgent: r.headers['user-agent'] ?? '',
          userArn: r.principal ?? null,
        },
      },
      pathParameters: Object.keys(r.params).length ? r.params : null,
      stageVariables: null,
      body: r.body,
      isBase64Encoded: r.isBase64Encoded,
    };
  }

  private eventV2(r: Request) {
    const cookies = r.headers.cookie?.split(/;\s*/);
    return {
      version: '2.0',
      routeKey: r.routeKey,
      rawPath: r.url.pathname,
      rawQueryString: r.url.search.slice(1),
      ...(cookies ? { cookies } : {}),
      headers: r.headers,
      ...([...r.url.searchParams.keys()].length ? { queryStringParameters: Object.fromEntries(r.url.searchParams) } : {}),
      requestContext: {
        ...this.context(r),
        ...(r.principal
          ? {
              authorizer: {
                iam: {
                  accessKey: r.accessKey,
                  accountId: this.o.account,
                  callerId: r.principal,
                  principalOrgId: null,
                  userArn: r.principal,
                  userId: r.principal,
                },
              },
            }
          : {}),
        http: {
          method: r.method,
          path: r.url.pathname,
          protocol: 'HTTP/1.1',
          sourceIp: r.sourceIp,
          userAgent: r.headers['user-agent'] ?? '',
        },
        routeKey: r.routeKey,
        time: new Date().toUTCString(),
        timeEpoch: Date.now(),
      },
      ...(Object.keys(r.params).length ? { pathParameters: r.params } : {}),
      ...(r.body !== null ? { body: r.body } : {}),
      isBase64Encoded: r.isBase64Encoded,
    };
  }
}

interface Request {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: string | null;
  isBase64Encoded: boolean;
  params: Record<string, string>;
  resource: string;
  routeKey: string;
  principal?: string;
  accessKey: string;
  sourceIp: string;
}

/** `/v1/flights/{flid}` against `/v1/flights/F1` → {flid: 'F1'}; `{proxy+}` takes the rest (one segment or more). */
function matchPath(pattern: string, path: string): Record<string, string> | undefined {
  const p = pattern.split('/').slice(1);
  const s = path.split('/').slice(1);
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    const seg = p[i]!;
    const greedy = /^\{(.+)\+\}$/.exec(seg);
    if (greedy) {
      const rest = s.slice(i).join('/');
      if (!rest) return undefined;
      params[greedy[1]!] = decodeURIComponent(rest);
      return params;
    }
    if (s[i] === undefined) return undefined;
    const param = /^\{(.+)\}$/.exec(seg);
    if (param) {
      if (!s[i]) return undefined;
      params[param[1]!] = decodeURIComponent(s[i]!);
    } else if (seg !== s[i]) return undefined;
  }
  return p.length === s.length ? params : undefined;
}
