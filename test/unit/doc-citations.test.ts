import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Comments cite the repository's own docs (issue 17): `docs/<page>.md "<section>"` or
 * `README "<section>"`. Each citation must name a page that exists and a heading, a bold
 * paragraph lead (`**TLS.**`) or a table row's first cell (the glossary's words) on it; and
 * nothing cites the design documents that are not in the repository.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const SELF = relative(ROOT, import.meta.filename)
  .split('\\')
  .join('/');
const CODE_DIRS = ['lib', 'functions', 'infra-cdk', 'test', 'bench', 'scripts', 'examples'];

function files(dir: string, ext: RegExp): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.name === 'node_modules' || e.name === 'cdk.out'
      ? []
      : e.isDirectory()
        ? files(join(dir, e.name), ext)
        : ext.test(e.name)
          ? [join(dir, e.name)]
          : [],
  );
}

const rel = (f: string) => relative(ROOT, f).split('\\').join('/');
const code = [...CODE_DIRS.flatMap((d) => files(join(ROOT, d), /\.(ts|mts|mjs|js)$/)), ...files(join(ROOT, 'migrations'), /\.sql$/)].filter(
  (f) => rel(f) !== SELF,
);
const docs = [join(ROOT, 'README.md'), ...files(join(ROOT, 'docs'), /\.md$/), ...files(join(ROOT, 'examples'), /\.md$/)];

/** What a citation may name on a page. */
function sections(page: string): string[] {
  const text = readFileSync(page, 'utf8');
  return [
    ...[...text.matchAll(/^#+ (.+)$/gm)].map((m) => m[1]!.trim()),
    ...[...text.matchAll(/\*\*([^*]+?)\.?\*\*/g)].map((m) => m[1]!.trim()),
    ...[...text.matchAll(/^\| ([^|]+?) \|/gm)].map((m) => m[1]!.replaceAll('`', '').trim()),
  ];
}

describe('comments cite the repository', () => {
  it('finds the citations it checks', () => {
    const all = code.flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/(docs\/[a-z]+\.md|README)(?: \([^)]*\))? "([^"\n]+)"/g)]);
    expect(all.length).toBeGreaterThan(30);
  });

  it('every docs/<page>.md "<section>" and README "<section>" names a page and a section on it', () => {
    const broken: string[] = [];
    const cache = new Map<string, string[]>();
    for (const f of code) {
      for (const m of readFileSync(f, 'utf8').matchAll(/(docs\/[a-z]+\.md|README)(?: \([^)]*\))? "([^"\n]+)"/g)) {
        const page = join(ROOT, m[1] === 'README' ? 'README.md' : m[1]!);
        if (!existsSync(page)) {
          broken.push(`${rel(f)}: ${m[0]} (no such page)`);
          continue;
        }
        if (!cache.has(page)) cache.set(page, sections(page));
        if (!cache.get(page)!.some((s) => s.startsWith(m[2]!))) broken.push(`${rel(f)}: ${m[0]} (no such section)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("the product's comments say why without issue numbers (the tracker is not in the repository either)", () => {
    const product = code.filter((f) => /^(lib|functions|infra-cdk|scripts|migrations)\//.test(rel(f)));
    expect(product.length).toBeGreaterThan(100);
    const hits = product.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .flatMap((line, i) => (/\bissue ?#?\d+/i.test(line) ? [`${rel(f)}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(hits).toEqual([]);
  });

  it('nothing cites the seeds or DESIGN.md, which are not in the repository', () => {
    const outside = /\bseed (?:0\d\d|points?\b)|\bDESIGN\.md\b|§\s?\d/i;
    const hits = [...code, ...docs].flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .flatMap((line, i) => (outside.test(line) ? [`${rel(f)}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(hits).toEqual([]);
  });
});
