import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../lib/app/context.ts';
import { buildConsoleScript } from '../../lib/http/console/build.ts';
import { consoleRoutes, loadConsoleScript } from '../../lib/http/consoleRoutes.ts';
import type { HttpRequest } from '../../lib/http/types.ts';

/**
 * The console's TypeScript (lib/http/console/src) becomes /console/app.js: built by esbuild from
 * the sources where they are (the twin, tests), read as a prebuilt file where they are not (the
 * Lambda bundle, test/infra/bundling.test.ts). Judged from the output: one browser ES module with
 * every page in it, valid JavaScript, and built from the sources actually present. That it works
 * in a browser is test/e2e/console*.test.ts.
 */
const ROOT = process.cwd();
const CONSOLE = join(ROOT, 'lib', 'http', 'console');
const temps: string[] = [];

/** A copy of lib/http/console to change, able to resolve esbuild. */
function copyOfConsole(): string {
  const dir = mkdtempSync(join(tmpdir(), 'msgx-console-'));
  temps.push(dir);
  cpSync(CONSOLE, dir, { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

afterAll(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

describe('the console script', () => {
  it('is one self-contained ES module for the browser, with every page module in it', async () => {
    const js = await buildConsoleScript();
    expect(js).not.toMatch(/^\s*(import|export)\s/m); // bundled: nothing left to load
    expect(js).not.toMatch(/\brequire\(|["']node:/);
    for (const f of readdirSync(join(CONSOLE, 'src'))) expect(js, f).toContain(`lib/http/console/src/${f}`);
    for (const route of [
      '/admin/stats',
      '/admin/throughput?minutes=60',
      '/admin/dead?',
      '/admin/replay',
      '/admin/trace/',
      '/admin/tx-messages/',
      '/admin/events?sourceKind=txmsg',
      '/admin/pause',
      '/admin/resume',
    ])
      expect(js, route).toContain(route);
    expect(js).toContain('"x-msgx-actor": "console"');
    // Valid JavaScript as a module (node parses it; running it needs a DOM).
    const dir = mkdtempSync(join(tmpdir(), 'msgx-console-js-'));
    temps.push(dir);
    writeFileSync(join(dir, 'app.mjs'), js);
    execFileSync(process.execPath, ['--check', join(dir, 'app.mjs')]);
  });

  it('is built from the sources present, so an edit is in the next build', async () => {
    const dir = copyOfConsole();
    const file = join(dir, 'src', 'overview.ts');
    writeFileSync(file, readFileSync(file, 'utf8').replace('Throughput and latency, last hour', 'Edited chart title'));
    const js = await loadConsoleScript(dir);
    expect(js).toContain('Edited chart title');
    expect(js).not.toContain('Throughput and latency, last hour');
  });

  it('refuses sources that do not build, naming the file', async () => {
    const dir = copyOfConsole();
    writeFileSync(join(dir, 'src', 'nav.ts'), `${readFileSync(join(dir, 'src', 'nav.ts'), 'utf8')}\nexport const broken = ;\n`);
    await expect(loadConsoleScript(dir)).rejects.toThrow(/nav\.ts:\d+:\d+: ERROR/);
  });

  it('without sources beside it (the Lambda bundle) is the prebuilt app.js, and neither is an error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'msgx-console-built-'));
    temps.push(dir);
    await expect(loadConsoleScript(dir)).rejects.toThrow(/ENOENT.*app\.js/);
    writeFileSync(join(dir, 'app.js'), 'console.log("prebuilt");');
    expect(await loadConsoleScript(dir)).toBe('console.log("prebuilt");');
  });

  it('is served at /console/app.js to an operator, the same on every request, and refused to anyone else', async () => {
    const route = consoleRoutes.find((r) => r.path === '/console/{asset}')!;
    const ctx = { config: { http: {} } } as unknown as AppContext;
    const req = {
      method: 'GET',
      path: '/console/app.js',
      headers: {},
      query: {},
      body: '',
      params: { asset: 'app.js' },
      isAdmin: true,
    } as HttpRequest;
    const [a, b] = [await route.handle(req, ctx), await route.handle(req, ctx)];
    expect(a.status).toBe(200);
    expect(a.headers?.['content-type']).toBe('text/javascript; charset=utf-8');
    expect(a.body).toBe(await buildConsoleScript());
    expect(b.body).toBe(a.body);
    await expect(Promise.resolve().then(() => route.handle({ ...req, isAdmin: false }, ctx))).rejects.toMatchObject({ status: 403 });
  });
});
