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
    // The kill run takes ~2.5 min alone and ~5.5 min on a host shared with other work.
    testTimeout: 600_000,
    hookTimeout: 120_000,
  },
});
