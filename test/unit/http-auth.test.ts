import { describe, expect, it } from 'vitest';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import { loadConfig } from '../../lib/config/config.ts';
import { actorOf, cliActor } from '../../lib/http/actor.ts';
import { fromApiGateway } from '../../lib/http/apigw.ts';
import { isTwinAdmin } from '../../lib/http/node.ts';
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

  it('in the cloud it is the IAM principal, whatever headers the client sends', () => {
    const req = fromApiGateway(event({ 'X-Msgx-Actor': 'mallory', 'x-amzn-principal': 'arn:forged' }, 'arn:aws:iam::1:user/alice'));
    expect(req.isAdmin).toBe(true);
    expect(actorOf(req)).toBe('arn:aws:iam::1:user/alice');
    expect(req.headers['x-msgx-actor']).toBeUndefined();
  });

  it('in the cloud a client header never makes an actor or an operator', () => {
    const req = fromApiGateway(event({ 'x-msgx-actor': 'mallory', 'x-amzn-principal': 'arn:forged' }));
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
