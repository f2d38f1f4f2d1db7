import { describe, expect, it } from 'vitest';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import { loadConfig } from '../../lib/config/config.ts';
import { actorOf, cliActor } from '../../lib/http/actor.ts';
import { fromApiGateway } from '../../lib/http/apigw.ts';
import { isTwinAdmin } from '../../lib/http/node.ts';
import { checkOperator } from '../../lib/http/operators.ts';
import { apiGatewayEventV2 } from '../helpers/apiGatewayEvent.ts';
import { ConfigError } from '../../lib/shared/errors.ts';

const TOKEN = 'a-token-of-twenty-chars';

describe('admin token', () => {
  it('is accepted only as Authorization: Bearer <token>', () => {
    expect(isTwinAdmin(TOKEN, `Bearer ${TOKEN}`, '203.0.113.9')).toBe(true);
    expect(isTwinAdmin(TOKEN, `bearer ${TOKEN}`, '203.0.113.9')).toBe(true); // the scheme is case-insensitive (RFC 9110)
    for (const given of [TOKEN, `Basic ${TOKEN}`, `Bearer ${TOKEN}x`, `Bearer ${TOKEN} extra`, 'Bearer ', undefined])
      expect(isTwinAdmin(TOKEN, given, '127.0.0.1')).toBe(false); // loopback does not bypass a set token
  });

  it('without a token, loopback callers are operators and others are not', () => {
    expect(isTwinAdmin(undefined, undefined, '127.0.0.1')).toBe(true);
    expect(isTwinAdmin(undefined, undefined, '::1')).toBe(true);
    expect(isTwinAdmin(undefined, undefined, '172.17.0.1')).toBe(false);
  });

  it('shorter than 16 characters is refused at start, naming MSGX_ADMIN_TOKEN', () => {
    expect(() => loadConfig({ MSGX_ADMIN_TOKEN: 's3cret' })).toThrow(ConfigError);
    expect(() => loadConfig({ MSGX_ADMIN_TOKEN: 's3cret' })).toThrow(/MSGX_ADMIN_TOKEN: must be at least 16 characters/);
    expect(loadConfig({ MSGX_ADMIN_TOKEN: TOKEN }).http.adminToken).toBe(TOKEN);
  });

  it('MSGX_HTTP_ALLOWED_HOSTS and MSGX_HTTP_REQUEST_TIMEOUT are parsed and validated', () => {
    const c = loadConfig({ MSGX_HTTP_ALLOWED_HOSTS: 'msgx, twin.local:8080', MSGX_HTTP_REQUEST_TIMEOUT: '2s' });
    expect(c.http.allowedHosts).toEqual(['msgx', 'twin.local:8080']);
    expect(c.http.requestTimeoutMs).toBe(2000);
    expect(() => loadConfig({ MSGX_HTTP_ALLOWED_HOSTS: 'http://msgx/' })).toThrow(/MSGX_HTTP_ALLOWED_HOSTS/);
    expect(() => loadConfig({ MSGX_HTTP_REQUEST_TIMEOUT: 'soon' })).toThrow(/MSGX_HTTP_REQUEST_TIMEOUT/);
  });
});

describe('audit actor: one rule', () => {
  const event = (headers: Record<string, string>, userArn?: string) =>
    ({
      httpMethod: 'POST',
      path: '/admin/pause',
      headers,
      queryStringParameters: null,
      body: null,
      isBase64Encoded: false,
      requestContext: { identity: { userArn: userArn ?? null, caller: null } },
    }) as unknown as APIGatewayProxyEvent;

  const OPS = 'arn:aws:iam::123456789012:role/ops/msgx-operator';

  it('in the cloud it is the listed operator role, whatever headers the client sends', () => {
    const req = fromApiGateway(event({ 'X-Msgx-Actor': 'mallory', 'x-amzn-principal': 'arn:forged' }, OPS), [OPS]);
    expect(req.isAdmin).toBe(true);
    expect(actorOf(req)).toBe(OPS);
    expect(req.headers['x-msgx-actor']).toBeUndefined();
  });

  it('in the cloud a client header never makes an actor or an operator', () => {
    const req = fromApiGateway(event({ 'x-msgx-actor': 'mallory', 'x-amzn-principal': 'arn:forged' }), [OPS]);
    expect(req.isAdmin).toBe(false);
    expect(actorOf(req)).toBe('operator');
  });

  it("in the twin it is the operator's own label (control characters removed), else 'operator'", () => {
    expect(actorOf({ headers: { 'x-msgx-actor': 'console' } })).toBe('console');
    expect(actorOf({ headers: { 'x-msgx-actor': 'cli:\u0000bob\n' } })).toBe('cli:bob');
    expect(actorOf({ headers: { 'x-msgx-actor': 'x'.repeat(500) } })).toHaveLength(200);
    expect(actorOf({ headers: {} })).toBe('operator');
  });

  it('the CLI names itself cli:<user>, the same label over HTTP and on the database directly', () => {
    expect(cliActor('bob')).toBe('cli:bob');
    expect(cliActor(undefined)).toBe('cli:operator');
    // Over HTTP the label passes through the one rule unchanged.
    expect(actorOf({ headers: { 'x-msgx-actor': cliActor('bob') } })).toBe('cli:bob');
  });
});

describe('operators in the cloud: the listed IAM roles, nobody else', () => {
  const OPS = 'arn:aws:iam::123456789012:role/ops/msgx-operator';
  const OTHER = 'arn:aws:iam::123456789012:role/msgx-upstream';

  it('a session of a listed role is an operator, the path-less session ARN matching the role with a path; the actor is the role and its session', () => {
    expect(checkOperator('arn:aws:sts::123456789012:assumed-role/msgx-operator/alice@example.com', [OTHER, OPS])).toEqual({
      ok: true,
      actor: `${OPS} (session alice@example.com)`,
    });
    expect(checkOperator(OPS, [OPS])).toEqual({ ok: true, actor: OPS });
  });

  it('refuses, saying why: no identity, nobody configured, not a role, a role not listed (same name in another account or partition too)', () => {
    const refused = (caller: string | undefined, list: string[]) => {
      const r = checkOperator(caller, list);
      expect(r.ok).toBe(false);
      return r.ok ? '' : r.reason;
    };
    expect(refused(undefined, [OPS])).toMatch(/carries no IAM identity; sign it with SigV4/);
    expect(refused(OPS, [])).toMatch(/no operator roles are configured .*MSGX_OPERATOR_PRINCIPALS/);
    expect(refused('arn:aws:iam::123456789012:user/alice', [OPS])).toMatch(/user\/alice is not an IAM role or a session of one/);
    expect(refused('arn:aws:sts::123456789012:assumed-role/msgx-upstream/s1', [OPS])).toMatch(
      /assumed-role\/msgx-upstream\/s1 is not an operator \(its role is not in MSGX_OPERATOR_PRINCIPALS\)/,
    );
    expect(refused('arn:aws:sts::999999999999:assumed-role/msgx-operator/s1', [OPS])).toMatch(/is not an operator/);
    expect(refused('arn:aws-cn:sts::123456789012:assumed-role/msgx-operator/s1', [OPS])).toMatch(/is not an operator/);
    expect(refused('arn:aws:sts::123456789012:assumed-role/msgx-operator-2/s1', [OPS])).toMatch(/is not an operator/);
  });

  it('reads the signer from payload 2.0 (requestContext.authorizer.iam.userArn) and keeps the 403 reason on the request', () => {
    const ok = fromApiGateway(
      apiGatewayEventV2('POST', '/admin/pause', { callerArn: 'arn:aws:sts::123456789012:assumed-role/msgx-operator/bob' }),
      [OPS],
    );
    expect(ok).toMatchObject({ method: 'POST', path: '/admin/pause', isAdmin: true, principal: `${OPS} (session bob)` });
    const upstream = fromApiGateway(apiGatewayEventV2('POST', '/admin/pause', { callerArn: `${OTHER}` }), [OPS]);
    expect(upstream.isAdmin).toBe(false);
    expect(upstream.principal).toBeUndefined();
    expect(upstream.notAdminBecause).toMatch(/msgx-upstream is not an operator/);
  });

  it('MSGX_OPERATOR_PRINCIPALS takes IAM role ARNs only, naming the variable', () => {
    expect(loadConfig({ MSGX_OPERATOR_PRINCIPALS: `${OPS}, ${OTHER}` }).http.operatorPrincipals).toEqual([OPS, OTHER]);
    expect(loadConfig({}).http.operatorPrincipals).toEqual([]);
    for (const bad of [
      'arn:aws:iam::123456789012:user/alice',
      'arn:aws:sts::123456789012:assumed-role/x/y',
      'msgx-operator',
      'arn:aws:iam::1234:role/x',
    ])
      expect(() => loadConfig({ MSGX_OPERATOR_PRINCIPALS: bad })).toThrow(
        /MSGX_OPERATOR_PRINCIPALS: must be a comma list of IAM role ARNs/,
      );
  });
});
