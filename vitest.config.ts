import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    // Most files wait on other processes (git, PostgreSQL, servers they start), not on their own
    // CPU: two files at a time even on two cores (vitest's default, cores - 1, ran one at a time).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    testTimeout: 30_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    reporters: ['default'],
  },
});
