import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { FUNCTION_ROLES, type FunctionRole } from '../../infra-cdk/config.ts';
import { LIVE_ALIAS } from '../../infra-cdk/constructs/msgx-function.ts';
import type { MsgxStacks } from '../../infra-cdk/build.ts';
import { synth } from './synth.ts';

// Synthesizing five stacks takes seconds alone and minutes on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

type Resource = { Type: string; Properties?: Record<string, unknown>; DependsOn?: string | string[] };

/** Logical ids a value refers to (Ref, Fn::GetAtt, and Fn::Sub's ${X} / ${X.Attr}). */
function refsIn(v: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(v)) for (const x of v) refsIn(x, out);
  else if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      if (k === 'Ref' && typeof x === 'string') out.add(x);
      else if (k === 'Fn::GetAtt') out.add(Array.isArray(x) ? String(x[0]) : String(x).split('.')[0]!);
      else if (k === 'Fn::Sub') for (const m of JSON.stringify(x).matchAll(/\$\{([A-Za-z0-9]+)/g)) out.add(m[1]!);
      refsIn(x, out);
    }
  }
  return out;
}

/**
 * What CloudFormation waits for before it creates or updates `id`: its DependsOn and every
 * resource it refers to, transitively — the order a deploy follows.
 */
function waitsFor(resources: Record<string, Resource>, id: string): Set<string> {
  const seen = new Set<string>();
  const visit = (x: string) => {
    const r = resources[x];
    if (!r) return; // a parameter or a pseudo parameter
    const direct = [...(r.DependsOn ? [r.DependsOn].flat() : []), ...refsIn(r.Properties)];
    for (const d of direct)
      if (!seen.has(d)) {
        seen.add(d);
        visit(d);
      }
  };
  visit(id);
  return seen;
}

/**
 * New code runs only after its migration succeeded. CloudFormation updates a function's code
 * ($LATEST) as soon as it gets to it; what makes that safe is that nobody invokes $LATEST: every
 * caller invokes the function's `live` alias, and the alias (and the version it points at) waits
 * for the migration trigger. Judged on the Service template alone, by the order CloudFormation
 * derives from it. (Breaking it: an alias created without the dependency on the trigger fails the
 * first test; a schedule or the API pointed at the function itself fails the second.)
 */
describe('deploy order', () => {
  let s: MsgxStacks;
  let resources: Record<string, Resource>;
  let trigger: string;
  const id = (c: { node: { defaultChild?: unknown } }) => s.service.getLogicalId(c.node.defaultChild as never);
  const fnId = (role: FunctionRole) => id(s.service.functions[role].fn);
  const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
  const callable = FUNCTION_ROLES.filter((r) => r !== 'migrate');

  beforeAll(() => {
    s = synth();
    resources = Template.fromStack(s.service).toJSON().Resources as Record<string, Resource>;
    const triggers = ofType('Custom::Trigger');
    expect(triggers).toHaveLength(1);
    trigger = triggers[0]![0];
  });

  it('publishes every function but migrate as a version and a live alias, both after the migration', () => {
    const aliases = ofType('AWS::Lambda::Alias');
    expect(aliases.map(([, a]) => refsIn(a.Properties!.FunctionName)).flatMap((x) => [...x])).toEqual(
      expect.arrayContaining(callable.map(fnId)),
    );
    expect(aliases).toHaveLength(callable.length);
    for (const role of callable) {
      const [aliasId, alias] = aliases.find(([, a]) => refsIn(a.Properties!.FunctionName).has(fnId(role)))!;
      expect(alias.Properties!.Name, role).toBe(LIVE_ALIAS);
      const [versionId] = [...refsIn(alias.Properties!.FunctionVersion)];
      expect(resources[versionId!]!.Type, role).toBe('AWS::Lambda::Version');
      expect(refsIn(resources[versionId!]!.Properties!.FunctionName).has(fnId(role)), role).toBe(true);
      expect(waitsFor(resources, versionId!).has(trigger), `${role}: its version is published before the migration`).toBe(true);
      expect(waitsFor(resources, aliasId).has(trigger), `${role}: its alias moves before the migration`).toBe(true);
    }
    // The migration runs the migrate function's own new version, which cannot wait for itself.
    const handler = refsIn(resources[trigger]!.Properties!.HandlerArn);
    const [migrateVersion] = [...handler];
    expect(resources[migrateVersion!]!.Type).toBe('AWS::Lambda::Version');
    expect(refsIn(resources[migrateVersion!]!.Properties!.FunctionName).has(fnId('migrate'))).toBe(true);
    expect(waitsFor(resources, trigger).has(migrateVersion!)).toBe(true);
  });

  it('lets every caller reach a function through its alias only, so each caller waits for the migration', () => {
    const aliasOf = Object.fromEntries(callable.map((r) => [r, id(s.service.functions[r].live!)])) as Record<string, string>;
    const fnIds = new Set(FUNCTION_ROLES.map(fnId));
    // The schedules.
    const schedules = ofType('AWS::Scheduler::Schedule');
    expect(schedules.length).toBeGreaterThan(0);
    for (const [sid, sch] of schedules) {
      const targets = [...refsIn((sch.Properties!.Target as { Arn: unknown }).Arn)];
      expect(targets.length, sid).toBe(1);
      expect(Object.values(aliasOf), sid).toContain(targets[0]);
      expect(waitsFor(resources, sid).has(trigger), sid).toBe(true);
    }
    // The HTTP API: every integration invokes the ingress's alias, and may invoke nothing else.
    const integrations = ofType('AWS::ApiGatewayV2::Integration');
    expect(integrations.length).toBeGreaterThan(0);
    for (const [iid, integ] of integrations) {
      expect([...refsIn(integ.Properties!.IntegrationUri)], iid).toEqual([aliasOf.ingress]);
      expect(waitsFor(resources, iid).has(trigger), iid).toBe(true);
    }
    for (const [pid, p] of ofType('AWS::Lambda::Permission'))
      if (String(p.Properties!.Principal).includes('apigateway'))
        expect(
          [...refsIn(p.Properties!.FunctionName)].filter((r) => fnIds.has(r) || r.includes('Live')),
          pid,
        ).toEqual([aliasOf.ingress]);
    // Every lambda:InvokeFunction grant (the scheduler's role, the ingress's kick) names aliases only.
    for (const [pid, pol] of ofType('AWS::IAM::Policy')) {
      const statements = (pol.Properties!.PolicyDocument as { Statement: { Action: string | string[]; Resource: unknown }[] }).Statement;
      for (const st of statements.filter((x) => [x.Action].flat().includes('lambda:InvokeFunction'))) {
        const targets = [...refsIn(st.Resource)];
        expect(targets.length, pid).toBeGreaterThan(0);
        for (const t of targets) expect(Object.values(aliasOf), `${pid} may invoke ${t}`).toContain(t);
      }
    }
    // The ingress's kick invokes by the alias's ARN.
    const env = (resources[fnId('ingress')]!.Properties!.Environment as { Variables: Record<string, unknown> }).Variables;
    expect(env.MSGX_PUMP_FUNCTION_NAME).toEqual({ Ref: aliasOf.pump });
    expect(env.MSGX_POLLER_FUNCTION_NAME).toEqual({ Ref: aliasOf.poller });
    // Async invokes of the alias are dropped after a minute, never retried (the next tick comes).
    const invokeConfigs = ofType('AWS::Lambda::EventInvokeConfig');
    expect(invokeConfigs.length).toBeGreaterThan(0);
    for (const [cid, c] of invokeConfigs) {
      const qualifier = [...refsIn(c.Properties!.Qualifier)];
      expect(qualifier, cid).toHaveLength(1);
      expect(Object.values(aliasOf), cid).toContain(qualifier[0]);
    }
  });
});
