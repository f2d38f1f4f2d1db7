import { defineConfig } from 'vitest/config';

/**
 * Suites that also run on the twin's embedded engine (PGlite), so the default users keep is
 * tested like the real one: test/helpers/services.ts freshPg() gives a PgliteDb under
 * MSGX_TEST_ENGINE=pglite. test/integration/embedded.test.ts adds the twin's whole stack on PGlite.
 */
const ON_BOTH_ENGINES = [
  'test/integration/pipeline.test.ts',
  'test/integration/pipeline-fallback.test.ts',
  'test/integration/requests.test.ts',
  'test/integration/replay.test.ts',
  'test/integration/flights-flop.test.ts',
];

export default defineConfig({
  test: {
    exclude: ['test/faults/**', 'node_modules/**'],
    // Bounds for a hung test, not targets: CI shares two cores with PostgreSQL, MariaDB and Kafka.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Two cores: a few files at a time, each in its own database.
    maxWorkers: 3,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: { name: 'pg', include: ['test/**/*.test.ts'], exclude: ['test/faults/**', 'test/cloud/**', 'node_modules/**'] },
      },
      // The emulated cloud (docs/cloud-tests.md): the dev stage synthesized once per run, then deployed per file.
      {
        extends: true,
        test: { name: 'cloud', include: ['test/cloud/**/*.test.ts'], globalSetup: ['test/cloud/globalSetup.ts'], testTimeout: 300_000 },
      },
      { extends: true, test: { name: 'pglite', include: ON_BOTH_ENGINES, env: { MSGX_TEST_ENGINE: 'pglite' } } },
    ],
  },
});
