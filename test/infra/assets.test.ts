import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildMsgx, REPO_ROOT } from '../../infra-cdk/build.ts';
import { FUNCTION_ROLES, type FunctionRole } from '../../infra-cdk/config.ts';
import { buildConsoleScript } from '../../lib/http/console/build.ts';
import { CDK_CONTEXT, MAILBOX_SECRET_ARN } from './synth.ts';

// Bundling six functions takes a minute on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

type Resource = { Type: string; Properties: Record<string, unknown> };

/**
 * What `cdk deploy` would upload: the Service template's functions and the asset folders CDK
 * wrote beside it (cdk.out/asset.<hash>/), read as files — never the sources. Each function's
 * asset must hold its own handler: one shared S3Key means every function runs one role's code.
 */
describe('function assets, as `cdk synth` writes them', () => {
  let outdir: string;
  let functions: Record<FunctionRole, { key: string; dir: string; env: Record<string, string> }>;

  beforeAll(() => {
    outdir = mkdtempSync(join(tmpdir(), 'msgx-assets-'));
    const app = new App({
      outdir,
      context: { ...CDK_CONTEXT, bundling: 'esbuild', mailboxHost: 'cmin-db.corp.internal', mailboxSecretArn: MAILBOX_SECRET_ARN },
    });
    const stacks = buildMsgx(app, { nag: false });
    app.synth();
    const template = JSON.parse(readFileSync(join(outdir, `${stacks.service.stackName}.template.json`), 'utf8')) as {
      Resources: Record<string, Resource>;
    };
    functions = {} as typeof functions;
    for (const role of FUNCTION_ROLES) {
      const id = stacks.service.getLogicalId(stacks.service.functions[role].fn.node.defaultChild as never);
      const r = template.Resources[id]!;
      expect(r.Type).toBe('AWS::Lambda::Function');
      const key = (r.Properties.Code as { S3Key: string }).S3Key;
      expect(key, role).toMatch(/^[0-9a-f]{64}\.zip$/);
      const env = (r.Properties.Environment as { Variables: Record<string, string> }).Variables ?? {};
      functions[role] = { key, dir: join(outdir, `asset.${key.replace(/\.zip$/, '')}`), env };
    }
  });
  afterAll(() => {
    if (outdir) rmSync(outdir, { recursive: true, force: true });
  });

  it('gives every function an asset of its own', () => {
    const keys = FUNCTION_ROLES.map((r) => functions[r].key);
    expect(new Set(keys).size, keys.join('\n')).toBe(FUNCTION_ROLES.length);
    for (const role of FUNCTION_ROLES) expect(existsSync(join(functions[role].dir, 'index.mjs')), role).toBe(true);
  });

  it("holds that role's entry and no other function's, as its source maps record", () => {
    for (const role of FUNCTION_ROLES) {
      const { dir } = functions[role];
      const sources = readdirSync(dir)
        .filter((f) => f.endsWith('.mjs.map'))
        .flatMap((f) => (JSON.parse(readFileSync(join(dir, f), 'utf8')) as { sources: string[] }).sources);
      const entries = [...new Set(sources.map((s) => /(?:^|\/)functions\/([a-z]+)\.ts$/.exec(s)?.[1]).filter(Boolean))];
      expect(entries, `${role}: function entries in its bundle`).toEqual([role]);
      // index.mjs itself carries the entry (not a chunk loaded later).
      const indexSources = (JSON.parse(readFileSync(join(dir, 'index.mjs.map'), 'utf8')) as { sources: string[] }).sources;
      expect(
        indexSources.some((s) => s.endsWith(`functions/${role}.ts`)),
        role,
      ).toBe(true);
    }
  });

  it('ships the files a function reads only with that function: the console with the ingress, the migrations with migrate', async () => {
    for (const role of FUNCTION_ROLES) {
      const { dir, env } = functions[role];
      expect(existsSync(join(dir, 'console')), `${role} console`).toBe(role === 'ingress');
      expect(existsSync(join(dir, 'migrations')), `${role} migrations`).toBe(role === 'migrate');
      expect(env.MSGX_MIGRATIONS_DIR !== undefined, `${role} MSGX_MIGRATIONS_DIR`).toBe(role === 'migrate');
    }
    const sql = readdirSync(join(functions.migrate.dir, 'migrations')).filter((f) => f.endsWith('.sql'));
    expect(sql.sort()).toEqual(
      readdirSync(join(REPO_ROOT, 'migrations'))
        .filter((f) => f.endsWith('.sql'))
        .sort(),
    );
    // The console as served without its sources: the static files and the built app.js only
    // (lib/http/consoleRoutes.ts reads it as it is; no TypeScript, no builder, no esbuild).
    expect(readdirSync(join(functions.ingress.dir, 'console')).sort()).toEqual(['app.js', 'index.html', 'login.html', 'style.css']);
    expect(readFileSync(join(functions.ingress.dir, 'console', 'app.js'), 'utf8')).toBe(await buildConsoleScript());
  });

  it('loads as the runtime loads it and exports the handler the template names', () => {
    // One fresh Node imports every asset's index.mjs (@aws-sdk from node_modules, as the runtime provides it).
    const dirs = Object.fromEntries(FUNCTION_ROLES.map((r) => [r, join(functions[r].dir, 'index.mjs')]));
    const code = `const out = {}; for (const [r, f] of Object.entries(${JSON.stringify(dirs)})) out[r] = typeof (await import(f)).handler; process.stdout.write(JSON.stringify(out));`;
    const types = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: REPO_ROOT, encoding: 'utf8' }));
    expect(types).toEqual(Object.fromEntries(FUNCTION_ROLES.map((r) => [r, 'function'])));
  });
});
