import { defineConfig } from 'vitest/config';

/**
 * `npm run test:faults`: SIGKILLed roles, stopped services, terminated backends and the hostile
 * corpus (docs/faults.md). One file at a time — the scenarios stop shared services and measure
 * recovery times, so they must not compete with each other — with generous per-test bounds.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    fileParallelism: false,
    pool: 'forks',
    testTimeout: 420_000,
    hookTimeout: 120_000,
  },
});
