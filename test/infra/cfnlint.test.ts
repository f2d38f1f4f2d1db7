import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { describe, expect, it, vi } from 'vitest';
import { buildMsgx } from '../../infra-cdk/build.ts';
import { CDK_CONTEXT, MAILBOX_SECRET_ARN } from './synth.ts';

// Synthesizing five stacks takes seconds alone and minutes on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

/**
 * cfn-lint on the synthesized templates, as CloudFormation would see them. Ignored checks, each
 * with its reason (also in docs/deploy.md):
 * - W3005 (DependsOn already implied by a GetAtt): CDK writes both for its own provider roles.
 */
const IGNORED = ['W3005'];

function synthTo(context: Record<string, unknown>): string {
  const outdir = mkdtempSync(join(tmpdir(), 'msgx-cfnlint-'));
  const app = new App({
    outdir,
    context: {
      ...CDK_CONTEXT,
      bundling: 'skip',
      mailboxHost: 'cmin-db.corp.internal',
      alarmEmail: 'msgx-oncall@corp.internal',
      mailboxSecretArn: MAILBOX_SECRET_ARN,
      mailboxSecurityGroupId: 'sg-0a1b2c3d4e5f60718',
      ...context,
    },
  });
  buildMsgx(app, { nag: false });
  app.synth();
  return outdir;
}

describe('cfn-lint', () => {
  it('is installed (CI installs it with pip when missing: .ci/run)', () => {
    expect(execFileSync('cfn-lint', ['--version'], { encoding: 'utf8' })).toMatch(/cfn-lint \d+\./);
  });

  for (const stage of ['dev', 'prod']) {
    it(`finds nothing in the ${stage} templates`, () => {
      const dir = synthTo({ stage });
      const templates = readdirSync(dir)
        .filter((f) => f.endsWith('.template.json'))
        .map((f) => join(dir, f));
      expect(templates).toHaveLength(5);
      const r = spawnSync('cfn-lint', ['--format', 'parseable', '--ignore-checks', ...IGNORED, '--', ...templates], {
        encoding: 'utf8',
      });
      expect(r.error).toBeUndefined();
      // Exit code 0: no error, no warning, no informational finding left.
      expect(r.stdout.trim().split('\n').filter(Boolean), r.stderr).toEqual([]);
      expect(r.status).toBe(0);
    }, 600_000);
  }
});
