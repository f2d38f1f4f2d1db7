import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Stack, Validations } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { describe, expect, it, vi } from 'vitest';
import { buildMsgx, REPO_ROOT } from '../../infra-cdk/build.ts';

// Synthesizing five stacks takes seconds alone and minutes on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

const CDK_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, 'cdk.json'), 'utf8')).context as Record<string, unknown>;

function app(context: Record<string, unknown>): App {
  return new App({
    context: {
      ...CDK_CONTEXT,
      bundling: 'skip',
      mailboxHost: 'cmin-db.corp.internal',
      alarmEmail: 'msgx-oncall@corp.internal',
      mailboxSecretArn: 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:cmin/mailbox-AbCdEf',
      mailboxSecurityGroupId: 'sg-0123456789abcdef0',
      ...context,
    },
  });
}

/** Every acknowledgment recorded anywhere in the tree: [path, rule id, reason]. */
function acknowledgments(root: IConstruct): [string, string, unknown][] {
  const out: [string, string, unknown][] = [];
  for (const c of root.node.findAll()) {
    for (const m of c.node.metadata) {
      if (m.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY || !m.data) continue;
      for (const [id, reason] of Object.entries(m.data as Record<string, unknown>)) out.push([c.node.path, id, reason]);
    }
  }
  return out;
}

// cdk-nag 3 runs as a CDK policy-validation plugin; acknowledgments go through Validations.of().
describe('cdk-nag AwsSolutions', () => {
  for (const [stage, extra] of [
    ['dev', {}],
    ['prod', {}],
    [
      'dev',
      { upstreamAuth: 'jwt', jwtIssuer: 'https://login.corp.internal', jwtAudience: 'msgx', alarmEmail: 'msgx-oncall@corp.internal' },
    ],
  ] as const) {
    it(`has no unacknowledged finding (stage ${stage}${Object.keys(extra).length ? ', options' : ''})`, () => {
      const a = app({ stage, ...extra });
      buildMsgx(a, { nag: false });
      a.synth();
      const report = new AwsSolutionsChecks(a, { verbose: true }).validateScope(a);
      const findings = report.violations.map(
        (v) => `${v.severity} ${v.ruleName} at ${v.violatingResources.map((r) => r.constructPath).join(', ')}`,
      );
      expect(findings).toEqual([]);
    });
  }

  it('gives every acknowledgment a written reason', () => {
    const a = app({ stage: 'dev' });
    buildMsgx(a, { nag: false });
    const acks = acknowledgments(a);
    expect(acks.length).toBeGreaterThan(0);
    for (const [path, id, reason] of acks) {
      expect(typeof reason === 'string' && reason.trim().length > 20, `${path} ${id}`).toBe(true);
    }
  });

  it('fails `cdk synth` when a new resource breaks a rule (the plugin is wired into the app)', () => {
    const a = app({ stage: 'dev' });
    buildMsgx(a); // nag from context: on
    const rogue = new Stack(a, 'Rogue');
    new s3.Bucket(rogue, 'Unlogged');
    let thrown = '';
    try {
      a.synth();
    } catch (err) {
      thrown = String(err);
    }
    // Exactly the rogue bucket's findings (unlogged, no TLS policy), and none on msgx's own
    // resources: a rule firing anywhere else, or the plugin not wired in, fails here.
    const flagged = [...thrown.matchAll(/^\s+(\S+) aws-cdk-lib\.\S+\n\s+Acknowledge with 'AwsSolutions::(\S+)'/gm)].map(
      (m) => `${m[1]} ${m[2]}`,
    );
    expect(flagged.sort()).toEqual(['Rogue/Unlogged/Resource AwsSolutions-S1', 'Rogue/Unlogged/Resource AwsSolutions-S10']);
  });
});
