import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it, vi } from 'vitest';
import { REPO_ROOT } from '../../infra-cdk/build.ts';
import { FUNCTION_ROLES } from '../../infra-cdk/config.ts';
import { synth } from './synth.ts';

// Synthesizing five stacks takes seconds alone and minutes on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000 });

const withEnv = (env: Record<string, unknown>, extra: Record<string, unknown> = {}) => synth({ ...extra, stages: { dev: { env } } });

/** The twin-only settings, written out (README marks them). */
const TWIN_ONLY = [
  'MSGX_HTTP_PORT',
  'MSGX_HTTP_HOST',
  'MSGX_HTTP_ALLOWED_HOSTS',
  'MSGX_HTTP_REQUEST_TIMEOUT',
  'MSGX_DATA_DIR',
  'MSGX_ADMIN_TOKEN',
];

describe('msgx settings per stage (cdk.json stages.<stage>.env)', () => {
  it('reach every function as environment variables', () => {
    const s = withEnv({
      MSGX_SHADOW: '1',
      MSGX_BACKOFF_MAX: '2m',
      MSGX_IDENTITY_DAY_BOUNDARY: 1,
      MSGX_FANOUT_WEBHOOKS: 'https://hooks.corp.internal/a',
    });
    const resources = Template.fromStack(s.service).toJSON().Resources;
    for (const role of FUNCTION_ROLES) {
      const id = s.service.getLogicalId(s.service.functions[role].fn.node.defaultChild as never);
      expect(resources[id].Properties.Environment.Variables, role).toMatchObject({
        MSGX_SHADOW: '1',
        MSGX_BACKOFF_MAX: '2m',
        MSGX_IDENTITY_DAY_BOUNDARY: '1',
        MSGX_FANOUT_WEBHOOKS: 'https://hooks.corp.internal/a',
        MSGX_TIMEZONE: 'Asia/Shanghai',
      });
    }
  });

  it("fail synth on a bad value, naming the setting, with the functions' own rule", () => {
    expect(() => withEnv({ MSGX_BACKOFF_MAX: 'soon' })).toThrow(/stages\.dev\.env\.MSGX_BACKOFF_MAX/);
    // A rule across settings, from the same schema.
    expect(() => withEnv({ MSGX_BACKOFF_INITIAL: '2m', MSGX_BACKOFF_MAX: '1m' })).toThrow(
      /stages\.dev\.env\.MSGX_BACKOFF_INITIAL: must not exceed MSGX_BACKOFF_MAX/,
    );
    expect(() => synth({ timezone: 'Mars/Olympus' })).toThrow(/context timezone \(MSGX_TIMEZONE\): must be an IANA time zone/);
  });

  it('refuse what a stage cannot set: unknown names, twin-only settings, what the stack sets', () => {
    expect(() => withEnv({ MSGX_SHADDOW: '1' })).toThrow(/stages\.dev\.env\.MSGX_SHADDOW is not a msgx setting/);
    expect(() => withEnv({ MSGX_HTTP_PORT: 9000 })).toThrow(/stages\.dev\.env\.MSGX_HTTP_PORT is read by the twin only/);
    expect(() => withEnv({ MSGX_PG_URL: 'postgres://x@db/msgx' })).toThrow(/stages\.dev\.env\.MSGX_PG_URL is set by the stack/);
  });

  it('lets the dispatcher write msgx topics and the listed transactional topics only; the list is required once check-back is on', () => {
    expect(() => synth({ txCheckAllowedOrigins: 'https://orders.corp.internal' })).toThrow(
      /stages\.dev\.env\.MSGX_TX_TOPICS \(or context txTopics\) is required/,
    );
    expect(() => synth({ txTopicPatterns: '*' })).toThrow(/context txTopicPatterns is no longer read/);
    const s = withEnv({ MSGX_TX_TOPICS: 'orders.events,billing.events' }, { txCheckAllowedOrigins: 'https://orders.corp.internal' });
    const t = Template.fromStack(s.service).toJSON();
    const roleId = s.service.getLogicalId(s.service.functions.dispatcher.fn.role!.node.defaultChild as never);
    const writes = Object.values(t.Resources as Record<string, { Type: string; Properties: Record<string, unknown> }>)
      .filter((r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(roleId))
      .flatMap((r) => (r.Properties.PolicyDocument as { Statement: { Action: string[] | string; Resource: unknown }[] }).Statement)
      .filter((st) => [st.Action].flat().includes('kafka-cluster:WriteData'));
    const text = JSON.stringify(writes.map((w) => w.Resource));
    // Topic ARNs end in /<topic>; no wildcard topic.
    const topics = [...text.matchAll(/\/([A-Za-z0-9._-]+)"/g)].map((m) => m[1]).sort();
    // msgx.offsets: the exactly-once cursors, written in each batch's transaction.
    expect(topics).toEqual([
      'billing.events',
      'msgx.msg',
      'msgx.msg.shadow',
      'msgx.offsets',
      'msgx.offsets.shadow',
      'msgx.schd',
      'msgx.schd.shadow',
      'orders.events',
    ]);
    expect(text).not.toMatch(/\/\*"/);
  });

  it('README marks exactly the twin-only settings', () => {
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    const marked = [...readme.matchAll(/^\| `(MSGX_[A-Z_]+)` \|[^|]*\| \*\(twin only\)\*/gm)].map((m) => m[1]).sort();
    expect(marked).toEqual([...TWIN_ONLY].sort());
  });
});
