// ESLint rule msgx/no-import-cycle: no file may reach itself through relative imports, type-only
// imports included. import-x/no-cycle skips `import type` (it vanishes at run time), but a type
// cycle still ties two modules together: neither can move or change without the other, and it is
// how a value cycle starts. Each file's imports are read with TypeScript's pre-processor (import,
// import type, export … from, import(), typeof import()) and cached by modification time.
import { readFileSync, statSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import ts from 'typescript';

const EXTENSIONS = ['', '.ts', '.mts', '.mjs', '.js', '/index.ts'];
/** file → { mtimeMs, deps } */
const cache = new Map();

function isFile(p) {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

function resolveRelative(from, specifier) {
  const base = resolve(dirname(from), specifier);
  for (const ext of EXTENSIONS) if (isFile(base + ext)) return base + ext;
  return undefined;
}

/** The files `file` imports by relative path, resolved; non-relative (package) imports are not followed. */
function depsOf(file) {
  let mtimeMs;
  try {
    mtimeMs = statSync(file).mtimeMs;
  } catch {
    return [];
  }
  const hit = cache.get(file);
  if (hit && hit.mtimeMs === mtimeMs) return hit.deps;
  const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  const deps = [
    ...new Set(
      info.importedFiles
        .map((f) => f.fileName)
        .filter((s) => s.startsWith('.'))
        .map((s) => resolveRelative(file, s))
        .filter(Boolean),
    ),
  ];
  cache.set(file, { mtimeMs, deps });
  return deps;
}

/** A path of imports from `start` back to `target`, or undefined. Breadth-first: the shortest. */
function pathBack(start, target) {
  const previous = new Map([[start, null]]);
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift();
    for (const dep of depsOf(file)) {
      if (dep === target) {
        const path = [file];
        for (let p = previous.get(file); p; p = previous.get(p)) path.unshift(p);
        return path;
      }
      if (!previous.has(dep)) {
        previous.set(dep, file);
        queue.push(dep);
      }
    }
  }
  return undefined;
}

export const noImportCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'Forbid relative import cycles, type-only imports included.' },
    schema: [],
    messages: {
      cycle:
        'Import cycle (type-only imports count): {{cycle}}. Put what both need in a file both import (a types.ts), or turn one import around.',
    },
  },
  create(context) {
    const filename = context.physicalFilename;
    const root = context.cwd;
    const check = (node, source) => {
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      const target = resolveRelative(filename, source);
      if (!target || target === filename) return;
      const back = pathBack(target, filename);
      if (!back) return;
      const cycle = [filename, ...back, filename].map((f) => relative(root, f)).join(' → ');
      context.report({ node, messageId: 'cycle', data: { cycle } });
    };
    const fromSource = (node) => check(node.source, node.source?.value);
    return {
      ImportDeclaration: fromSource,
      ExportNamedDeclaration: (node) => node.source && fromSource(node),
      ExportAllDeclaration: fromSource,
      ImportExpression: (node) => node.source.type === 'Literal' && check(node.source, node.source.value),
      TSImportType: (node) => {
        // typeof import('./x.ts'): the argument is a literal type (typescript-eslint 8: node.argument).
        const lit = node.argument?.literal ?? node.argument;
        if (lit && typeof lit.value === 'string') check(node, lit.value);
      },
    };
  },
};

export default { rules: { 'no-import-cycle': noImportCycle } };
