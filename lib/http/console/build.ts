import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type BuildOptions } from 'esbuild';

/**
 * The console's one build definition: src/*.ts (browser TypeScript, checked by
 * `tsc -p lib/http/console`) bundled by esbuild into the single ES module served as
 * /console/app.js. Two callers:
 * - lib/http/consoleRoutes.ts, where the sources are present (the twin, `npm start`, tests): it
 *   builds in-process on the first request for app.js (well under a second, esbuild's start
 *   included) and keeps the result for the process's life: no build step to forget, no stale output;
 * - the Lambda bundle (infra-cdk/bundle.ts runs this file as a script at synth): it writes the
 *   static files and the built app.js beside the function, without the sources, so the deployed
 *   code serves the file as it is and carries neither esbuild nor this module.
 */

const HERE = dirname(fileURLToPath(import.meta.url));

export const CONSOLE_ENTRY = join(HERE, 'src', 'main.ts');
/** Served as they are (lib/http/consoleRoutes.ts ASSETS, apart from app.js). */
export const STATIC_FILES = ['index.html', 'login.html', 'style.css'] as const;

export function consoleBuildOptions(): BuildOptions {
  return {
    entryPoints: [CONSOLE_ENTRY],
    tsconfig: join(HERE, 'tsconfig.json'),
    bundle: true,
    write: false,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    // Readable: the console is small, and an operator's browser shows the code as written.
    minify: false,
    legalComments: 'none',
    charset: 'utf8',
    logLevel: 'silent',
  };
}

/** The bundled console script (app.js). Rejects with esbuild's messages when the sources do not build. */
export async function buildConsoleScript(): Promise<string> {
  const result = await build(consoleBuildOptions());
  const out = result.outputFiles?.[0];
  if (!out) throw new Error('esbuild produced no console script');
  return out.text;
}

/** The console as the Lambda bundle carries it: the static files and the built app.js in `outdir`. */
export async function writeConsole(outdir: string): Promise<void> {
  mkdirSync(outdir, { recursive: true });
  for (const f of STATIC_FILES) copyFileSync(join(HERE, f), join(outdir, f));
  writeFileSync(join(outdir, 'app.js'), await buildConsoleScript());
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2]) {
  await writeConsole(process.argv[2]);
}
