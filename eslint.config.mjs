// ESLint here encodes the architecture only (docs/architecture.md, "Layering"): no import
// cycles and the allowed directions between folders. Style is not linted on purpose.
import tseslint from 'typescript-eslint';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';

const libDomains = ['app', 'audit', 'cli', 'codec', 'config', 'db', 'flights', 'http', 'jobs', 'mailbox',
  'observability', 'outbox', 'pipeline', 'requests', 'twin', 'txmsg'];

export default tseslint.config(
  { ignores: ['node_modules/**', 'cdk.out/**', 'dist/**', 'coverage/**', '.services/**'] },
  {
    files: ['**/*.ts', '**/*.mts', '**/*.mjs'],
    languageOptions: { parser: tseslint.parser, ecmaVersion: 2022, sourceType: 'module' },
    plugins: { 'import-x': importX },
    settings: {
      // Without these, no-cycle would not parse .ts dependencies and would see no cycles at all.
      'import-x/extensions': ['.ts', '.mts', '.mjs', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts', '.mts'] },
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.mjs', '.js'] })],
    },
    rules: {
      // Type-only imports do not count as cycles (they vanish at run time).
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-restricted-paths': ['error', {
        zones: [
          {
            target: './lib',
            from: ['./functions', './infra-cdk', './test', './bench'],
            message: 'lib/ is the library: it never imports its wrappers, infra, tests or benchmarks.',
          },
          {
            target: './lib/shared',
            from: libDomains.map((d) => `./lib/${d}`),
            message: 'lib/shared is a leaf: it imports no other lib domain (compose in lib/app).',
          },
          {
            target: './lib/constants.ts',
            from: ['./lib', './functions', './infra-cdk'],
            except: ['./constants.ts'],
            message: 'lib/constants.ts is dependency-free: infra-cdk reads it.',
          },
          {
            target: './lib/http/console/src',
            from: './lib',
            except: ['./http/console/src'],
            message: 'lib/http/console/src is browser code: it imports nothing from the server (src/model.ts mirrors the JSON it reads).',
          },
          {
            target: './infra-cdk',
            from: './lib',
            except: ['./constants.ts'],
            message: 'infra-cdk reads only lib/constants.ts (dependency-free) from lib/.',
          },
        ],
      }],
    },
  },
);
