import { readdirSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/** Tests are found by name: one per module or journey, words joined by dashes, each name once in the tree. */
const ROOT = join(import.meta.dirname, '..', '..');

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? testFiles(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

describe('test file names', () => {
  const files = testFiles(join(ROOT, 'test')).map((f) => relative(ROOT, f).split('\\').join('/'));

  it('join words with dashes, never dots', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(files.filter((f) => !/^[a-z0-9]+(-[a-z0-9]+)*\.test\.ts$/.test(basename(f)))).toEqual([]);
  });

  it('name each file once across the test folders', () => {
    const byName = new Map<string, string[]>();
    for (const f of files) byName.set(basename(f), [...(byName.get(basename(f)) ?? []), f]);
    expect([...byName.values()].filter((paths) => paths.length > 1)).toEqual([]);
  });
});
