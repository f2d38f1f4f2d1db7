import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ESLint, Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { afterAll, describe, expect, it } from 'vitest';
import { TYPE_AWARE_RULES } from '../../eslint.config.mjs';
import { noImportCycle } from '../../scripts/eslint-import-cycle.mjs';

/**
 * The architecture rules `npm test` runs (eslint.config.mjs, docs/architecture.md "Layering",
 * "Module surfaces") reject what they are meant to: a file off a module's surface, a domain
 * importing a runner, and an import cycle made only of `import type`.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const temps: string[] = [];
afterAll(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

/** Lints `code` as if it were the file at `path` (inside the repository) with the repository's config. */
async function lintAs(path: string, code: string): Promise<string[]> {
  // The probe file is not on disk, so the type checker cannot see it: only the architecture rules run.
  const withoutTypes = Object.fromEntries(Object.keys(TYPE_AWARE_RULES).map((r) => [r, 'off' as const]));
  const eslint = new ESLint({
    cwd: ROOT,
    overrideConfig: [{ files: ['**/*.ts'], languageOptions: { parserOptions: { projectService: false } }, rules: withoutTypes }],
  });
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, path) });
  return result!.messages.map((m) => `${m.ruleId}: ${m.message}`);
}

describe('architecture lint', () => {
  it("refuses a file off a module's surface, outside the module only", async () => {
    const off = await lintAs('lib/flights/probe.ts', `import { charge } from '../outbox/logFailures.ts';\nexport const x = charge;\n`);
    expect(off).toEqual([expect.stringMatching(/^import-x\/no-restricted-paths: .*Not on lib\/outbox's surface/)]);
    expect(
      await lintAs('lib/flights/probe.ts', `import { enqueueEvents } from '../outbox/enqueue.ts';\nexport const x = enqueueEvents;\n`),
    ).toEqual([]);
    // Inside the module every file is reachable.
    expect(await lintAs('lib/outbox/probe.ts', `import { charge } from './logFailures.ts';\nexport const x = charge;\n`)).toEqual([]);
    // Type-only imports are imports too.
    const typeOnly = await lintAs('lib/txmsg/probe.ts', `import type { Db } from '../db/pglite.ts';\nexport type X = Db;\n`);
    expect(typeOnly).toEqual([expect.stringMatching(/Not on lib\/db's surface/)]);
  }, 120_000);

  it('refuses a domain importing a runner or the composition root', async () => {
    const r = await lintAs(
      'lib/pipeline/probe.ts',
      `import { runWorker } from '../jobs/worker.ts';\nimport { buildContext } from '../app/buildContext.ts';\nexport const x = [runWorker, buildContext];\n`,
    );
    expect(r).toEqual([
      expect.stringMatching(/never imports the runners/),
      expect.stringMatching(/imports only the AppContext type and the role contract from lib\/app/),
    ]);
    expect(
      await lintAs('lib/pipeline/probe.ts', `import type { AppContext } from '../app/context.ts';\nexport type X = AppContext;\n`),
    ).toEqual([]);
  }, 120_000);

  it('msgx/no-import-cycle reports a cycle of type-only imports, naming it, and passes a chain', () => {
    const dir = mkdtempSync(join(tmpdir(), 'msgx-cycle-'));
    temps.push(dir);
    mkdirSync(join(dir, 'm'));
    writeFileSync(join(dir, 'a.ts'), `import type { B } from './m/b.ts';\nexport interface A { b: B }\n`);
    writeFileSync(join(dir, 'm', 'b.ts'), `import type { C } from './c.ts';\nexport interface B { c: C }\n`);
    writeFileSync(join(dir, 'm', 'c.ts'), `import type { A } from '../a.ts';\nexport interface C { a?: A }\n`);
    writeFileSync(join(dir, 'd.ts'), `export { type A } from './a.ts';\n`);
    const linter = new Linter({ configType: 'flat', cwd: dir });
    const config = [
      {
        files: ['**/*.ts'],
        languageOptions: { parser: tseslint.parser, ecmaVersion: 2022 as const, sourceType: 'module' as const },
        plugins: { msgx: { rules: { 'no-import-cycle': noImportCycle } } },
        rules: { 'msgx/no-import-cycle': 'error' as const },
      },
    ];
    const lint = (file: string, code: string) => linter.verify(code, config, { filename: join(dir, file) }).map((m) => m.message);
    expect(lint('a.ts', `import type { B } from './m/b.ts';\nexport interface A { b: B }\n`)).toEqual([
      'Import cycle (type-only imports count): a.ts → m/b.ts → m/c.ts → a.ts. Put what both need in a file both import (a types.ts), or turn one import around.',
    ]);
    // d.ts re-exports a.ts but nothing leads back to d.ts.
    expect(lint('d.ts', `export { type A } from './a.ts';\n`)).toEqual([]);
  });
});
