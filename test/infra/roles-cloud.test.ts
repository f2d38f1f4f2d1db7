import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it, vi } from 'vitest';
import { SCHEDULED_ROLES } from '../../infra-cdk/config.ts';
import { synth } from './synth.ts';

vi.setConfig({ testTimeout: 600_000 });

type Resources = Record<string, { Type: string; Properties: Record<string, unknown> }>;
const ofType = (r: Resources, type: string) => Object.values(r).filter((x) => x.Type === type);

describe('roles and start in the cloud (README "Roles and start")', () => {
  it('a role switched off has its schedule disabled and no Heartbeat or LockTaken alarm; the others are untouched', () => {
    const s = synth({ stages: { dev: { env: { MSGX_DISABLED_ROLES: 'dispatcher' } } } });
    const schedules = ofType(Template.fromStack(s.service).toJSON().Resources as Resources, 'AWS::Scheduler::Schedule');
    const state = Object.fromEntries(schedules.map((x) => [String(x.Properties.Name).split('-').pop(), x.Properties.State]));
    expect(state).toEqual({ poller: 'ENABLED', pump: 'ENABLED', dispatcher: 'DISABLED', sweep: 'ENABLED' });
    const alarms = ofType(Template.fromStack(s.monitoring).toJSON().Resources as Resources, 'AWS::CloudWatch::Alarm').map((x) =>
      String(x.Properties.AlarmName),
    );
    for (const role of SCHEDULED_ROLES) {
      const has = (suffix: string) => alarms.some((n) => n.endsWith(`${role}-${suffix}`));
      expect(has('Heartbeat'), role).toBe(role !== 'dispatcher');
      expect(has('LockTaken'), role).toBe(role !== 'dispatcher');
    }
  });

  it('the upstream may read /all/flights, and each looping role may start only its own successor', () => {
    const s = synth();
    const t = Template.fromStack(s.service).toJSON().Resources as Resources;
    expect(ofType(t, 'AWS::ApiGatewayV2::Route').map((r) => r.Properties.RouteKey)).toContain('GET /all/flights');
    const selfPolicies = Object.entries(t).filter(([id, r]) => r.Type === 'AWS::IAM::Policy' && /SelfInvoke/.test(id));
    expect(selfPolicies).toHaveLength(SCHEDULED_ROLES.length);
    for (const [, p] of selfPolicies) {
      const doc = p.Properties.PolicyDocument as { Statement: { Action: string; Resource: unknown }[] };
      expect(doc.Statement).toHaveLength(1);
      expect(doc.Statement[0]!.Action).toBe('lambda:InvokeFunction');
      expect(JSON.stringify(doc.Statement[0]!.Resource)).not.toContain('*');
    }
  });
});
