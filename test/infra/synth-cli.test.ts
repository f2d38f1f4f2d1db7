import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { REPO_ROOT } from '../../infra-cdk/build.ts';

// Each case starts the app in a fresh Node (npx, tsx, aws-cdk-lib): seconds alone, minutes when loaded.
vi.setConfig({ testTimeout: 600_000 });

const CDK_JSON = JSON.parse(readFileSync(join(REPO_ROOT, 'cdk.json'), 'utf8')) as { app: string; context: Record<string, unknown> };

/**
 * The app as `cdk synth` starts it: cdk.json's `app` command, the context (cdk.json's, then the
 * `-c` values) in CDK_CONTEXT_JSON, the output folder in CDK_OUTDIR.
 */
function runApp(extra: Record<string, string>): { status: number | null; stderr: string; stdout: string; templates: string[] } {
  const outdir = mkdtempSync(join(tmpdir(), 'msgx-synth-cli-'));
  try {
    const r = spawnSync(CDK_JSON.app, {
      shell: true,
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env: { ...process.env, CDK_CONTEXT_JSON: JSON.stringify({ ...CDK_JSON.context, ...extra }), CDK_OUTDIR: outdir },
    });
    const templates = readdirSync(outdir).filter((f) => f.endsWith('.template.json'));
    return { status: r.status, stderr: r.stderr, stdout: r.stdout, templates };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

describe('`cdk synth` on first contact', () => {
  it('without the required settings: one message naming every missing one, exit 1, no stack trace', () => {
    const r = runApp({ stage: 'prod' });
    expect(r.status, r.stderr).toBe(1);
    expect(r.templates).toEqual([]);
    // Every required setting of prod, in the one message (not only the first one checked).
    for (const key of ['mailboxHost', 'mailboxSecretArn', 'alarmEmail'])
      expect(r.stderr, key).toMatch(new RegExp(`context ${key} is required`));
    expect(r.stderr.match(/cannot synthesize/g)).toHaveLength(1);
    expect(r.stderr.split('\n').filter((l) => /^\s+at /.test(l))).toEqual([]);
  });

  it('reports bad values alongside missing ones, each naming its setting', () => {
    const r = runApp({ mailboxHost: '10.1.2.3', topicPartitions: 'six' });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/context mailboxHost must be the mailbox's DNS name/);
    expect(r.stderr).toMatch(/context mailboxSecretArn is required/);
    expect(r.stderr).toMatch(/context topicPartitions must be a number/);
    expect(r.stderr.split('\n').filter((l) => /^\s+at /.test(l))).toEqual([]);
  });

  it("synthesizes with the README's synth command, as written (bundling skipped: test/infra/assets.test.ts bundles)", () => {
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    const line = readme.split('\n').find((l) => l.startsWith('npx cdk synth'));
    expect(line, 'README shows a synth command').toBeDefined();
    const context = Object.fromEntries([...line!.matchAll(/-c\s+([A-Za-z]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
    expect(Object.keys(context).sort()).toEqual(['mailboxHost', 'mailboxSecretArn']);
    const r = runApp({ ...context, bundling: 'skip' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.templates).toHaveLength(5);
  });
});
