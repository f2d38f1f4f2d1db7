// ESLint here encodes the architecture (docs/architecture.md, "Layering" and "Module surfaces"):
// no import cycles, the allowed directions between folders, and which files of a module others may
// import; and, with the type checker, the rules that find real mistakes (a promise nobody awaits, an
// object printed as [object Object], a value thrown that is not an Error). Style is not linted on
// purpose; unused files, exports and dependencies are knip's (knip.json).
import tseslint from 'typescript-eslint';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';
import msgx from './scripts/eslint-import-cycle.mjs';

const libDomains = [
  'app',
  'audit',
  'cli',
  'codec',
  'config',
  'db',
  'flights',
  'http',
  'jobs',
  'mailbox',
  'observability',
  'outbox',
  'pipeline',
  'requests',
  'twin',
  'txmsg',
];

/**
 * A module's surface: the files of lib/<module> that other lib folders and functions/ may import.
 * The rest of the folder is the module's own business (tests may import any file). There are no
 * index.ts barrels: an import names the file that defines what it uses, so a Lambda bundle and
 * the twin load only what they reach (and lazy imports stay lazy). Widening a surface is a
 * deliberate edit here. Modules not listed (shared, observability, http, app, jobs, cli, twin)
 * have no restriction of their own (the runners and lib/app are kept from the domains below).
 */
const SURFACES = {
  audit: ['audit.ts'],
  codec: ['decode.ts', 'encode.ts', 'message.ts', 'utf8.ts', 'vocabulary.ts', 'xml.ts'],
  config: ['config.ts', 'credentials.ts', 'delivery.ts', 'secrets.ts'],
  // pg.ts and pglite.ts are loaded on demand by open.ts: the cloud never loads PGlite.
  db: ['appUser.ts', 'db.ts', 'migrate.ts', 'open.ts', 'pgliteDir.ts', 'prepared.ts'],
  flights: ['events.ts', 'history.ts', 'processors.ts', 'routes.ts', 'snapLog.ts'],
  // mysql.ts is loaded on demand by open.ts.
  mailbox: ['mailbox.ts', 'open.ts', 'pg.ts'],
  outbox: [
    'dispatcher.ts',
    'enqueue.ts',
    'health.ts',
    'metrics.ts',
    'missingTopics.ts',
    'problems.ts',
    'publish.ts',
    'publishers/build.ts',
    'queries.ts',
    'replay.ts',
    // The sweep's event retention (lib/jobs/roles.ts), as pipeline exposes procArchive.ts.
    'retention.ts',
    'sourceEvents.ts',
    'topicCatalog.ts',
    'topics.ts',
    'types.ts',
  ],
  pipeline: [
    'backfill.ts',
    'frontier.ts',
    'groupScope.ts',
    'identityMode.ts',
    'pause.ts',
    'poller.ts',
    'procArchive.ts',
    'procState.ts',
    'procStats.ts',
    'processor.ts',
    'pump.ts',
    'replay.ts',
    'rescan.ts',
    'routes.ts',
    'states.ts',
  ],
  requests: ['match.ts', 'reconcile.ts', 'reference.ts', 'routes.ts', 'send.ts', 'track.ts'],
  txmsg: [
    'archive.ts',
    'checkBack.ts',
    'client.ts',
    'dead.ts',
    'hooks.ts',
    'redeliver.ts',
    'resend.ts',
    'routes.ts',
    'states.ts',
    'stats.ts',
    'topics.ts',
    'view.ts',
  ],
};

/** Domains sit below the runners: they never import lib/jobs, lib/twin, lib/cli or lib/app (but its AppContext type and the role contract). */
const belowRunners = ['audit', 'codec', 'config', 'db', 'flights', 'mailbox', 'observability', 'outbox', 'pipeline', 'requests', 'txmsg'];

/** The type-aware correctness rules (lint-rules.test.ts turns them off to lint probe files that are not on disk). */
export const TYPE_AWARE_RULES = {
  '@typescript-eslint/await-thenable': 'error',
  '@typescript-eslint/no-floating-promises': 'error',
  '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
  '@typescript-eslint/no-unnecessary-type-assertion': 'error',
  // A caught `unknown` passed on as it came is fine; a string or a plain object thrown is not.
  '@typescript-eslint/only-throw-error': ['error', { allowThrowingUnknown: true, allowThrowingAny: true }],
  '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true, allowThrowingAny: true }],
  '@typescript-eslint/no-unused-vars': [
    'error',
    { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
  ],
  '@typescript-eslint/no-unused-expressions': 'error',
  '@typescript-eslint/no-explicit-any': 'error',
  'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
};

export default tseslint.config(
  { ignores: ['node_modules/**', 'cdk.out/**', 'dist/**', 'coverage/**', '.services/**'] },
  {
    files: ['**/*.ts', '**/*.mts', '**/*.mjs'],
    languageOptions: { parser: tseslint.parser, ecmaVersion: 2022, sourceType: 'module' },
    plugins: { 'import-x': importX, msgx },
    settings: {
      // Without these, no-cycle would not parse .ts dependencies and would see no cycles at all.
      'import-x/extensions': ['.ts', '.mts', '.mjs', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts', '.mts'] },
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.mjs', '.js'] })],
    },
    rules: {
      // No cycles, type-only imports included (scripts/eslint-import-cycle.mjs; import-x/no-cycle
      // would skip `import type`).
      'msgx/no-import-cycle': 'error',
      'import-x/no-restricted-paths': [
        'error',
        {
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
              target: './lib/app/catalogue.ts',
              from: ['./lib', './functions', './infra-cdk'],
              except: ['./app/catalogue.ts'],
              message: 'lib/app/catalogue.ts is dependency-free: infra-cdk reads it (a role names its code by path).',
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
              except: ['./constants.ts', './app/catalogue.ts', './config/config.ts'],
              message:
                'infra-cdk reads only lib/constants.ts, lib/app/catalogue.ts (dependency-free) and lib/config/config.ts (the settings schema, checked at synth) from lib/.',
            },
            {
              target: belowRunners.map((d) => `./lib/${d}`),
              from: ['./lib/jobs', './lib/twin', './lib/cli'],
              message: 'A domain never imports the runners (lib/jobs, lib/twin, lib/cli): they import it.',
            },
            {
              target: belowRunners.map((d) => `./lib/${d}`),
              from: './lib/app',
              except: ['./context.ts', './role.ts'],
              message:
                'A domain imports only the AppContext type and the role contract from lib/app (context.ts, role.ts): the composition root imports it.',
            },
            ...Object.entries(SURFACES).map(([module, files]) => ({
              target: [`./lib/!(${module})/**`, './functions/**'],
              from: `./lib/${module}`,
              except: files.map((f) => `./${f}`),
              message: `Not on lib/${module}'s surface (${files.join(', ')}); see SURFACES in eslint.config.mjs.`,
            })),
          ],
        },
      ],
    },
  },
  {
    // Type-aware correctness rules from typescript-eslint's recommended-type-checked set. Left out:
    // the no-unsafe-* family (msgx reads JSON, SQL rows and XML trees whose shape it checks by hand),
    // require-await (async methods that implement a port without awaiting are fine), and
    // no-base-to-string / restrict-template-expressions (they flag String(v) of an `unknown` already
    // narrowed by hand, the way the CLI and logs print values).
    files: ['**/*.ts'],
    ignores: ['lib/http/console/src/**'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: TYPE_AWARE_RULES,
  },
  // Tests may cast a parsed answer to `any` to reach into it.
  { files: ['test/**/*.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
);
