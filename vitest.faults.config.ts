import { defineConfig } from 'vitest/config';

/**
 * `npm run test:faults`: SIGKILLed roles, killed services, terminated backends and the hostile
 * corpus (docs/faults.md). The run starts its OWN MariaDB and Kafka broker (globalSetup.ts) and
 * kills only those. One file at a time — the scenarios kill services and measure recovery times,
 * so they must not compete with each other — with generous per-test bounds.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/faults/globalSetup.ts'],
    setupFiles: ['test/faults/privateEnv.ts'],
    fileParallelism: false,
    pool: 'forks',
    testTimeout: 420_000,
    hookTimeout: 120_000,
  },
});
