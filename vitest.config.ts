import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Fails the run when it leaves new streams or KV buckets on the shared NATS (127.0.0.1:4222).
    globalSetup: ['test/nats-leaks.setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
