import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/faults/**', 'node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: a few files at a time, each in its own database.
    maxWorkers: 3,
    pool: 'forks',
  },
});
