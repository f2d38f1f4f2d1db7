import { execFile } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { bundleFunction, MAX_BUNDLE_BYTES } from '../../infra-cdk/bundle.ts';
import { FUNCTION_ROLES } from '../../lib/app/catalogue.ts';
import { figure, type Figure, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { median } from '../lib/stats.ts';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..', '..');
const out = join(root, 'bench', '.out', 'lambda');
const FUNCTIONS = FUNCTION_ROLES;
/** Issue 14: each function at most 1 MB minified, imported in at most 100 ms. */
const MAX_IMPORT_MS = 100;

/** A fresh `node` importing the bundle (as a Lambda cold start does): ms around the import. */
async function coldImport(file: string): Promise<number> {
  const code = `const t = performance.now(); await import(${JSON.stringify(file)}); process.stdout.write(String(performance.now() - t)); process.exit(0);`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], { cwd: out, env: { PATH: process.env.PATH ?? '' } });
  return Number(stdout);
}

/**
 * `npm run bench -- --only bundle`: the Lambda bundles exactly as `cdk synth` builds them
 * (infra-cdk/bundle.ts, target node22, without the twin's code), their size and cold import.
 * No services needed.
 */
export async function bundleScenario(o: RunOptions): Promise<ScenarioResult> {
  mkdirSync(out, { recursive: true });
  const figures: Figure[] = [];
  const imports = o.quick ? 3 : 7;
  for (const fn of FUNCTIONS) {
    const outdir = join(out, fn);
    await bundleFunction({ repoRoot: root, fn, outdir, target: 'node22', sourcemap: false });
    const file = join(outdir, 'index.mjs');
    figures.push(
      figure(`bundle.size.${fn}`, `${fn}: bundle (minified)`, 'KB', [statSync(file).size / 1000], {
        target: { op: '<', value: MAX_BUNDLE_BYTES / 1000 + 0.001 },
        headline: fn === 'ingress',
      }),
    );
    const times: number[] = [];
    for (let i = 0; i < imports; i++) times.push(await coldImport(file));
    figures.push(
      figure(`bundle.import.${fn}`, `${fn}: cold import (median of ${imports})`, 'ms', [median(times)], {
        target: { op: '<', value: MAX_IMPORT_MS + 0.001 },
        note: `runs ${times.map((t) => t.toFixed(0)).join(', ')}`,
      }),
    );
  }
  return {
    scenario: 'bundle',
    title: 'Lambda bundles: size and cold import (target: ≤ 1 MB, ≤ 100 ms each)',
    figures,
    notes: [
      `bundled with infra-cdk/bundle.ts (the CDK's definition), node22, no source maps; cold import = a fresh node ${process.version} process importing index.mjs, median of ${imports}.`,
    ],
    meta: { functions: FUNCTIONS, maxBytes: MAX_BUNDLE_BYTES, maxImportMs: MAX_IMPORT_MS },
  };
}
