/**
 * Tests run from TypeScript through ts-jest (transpile only: `tsc -b` in `pretest`
 * type-checks everything once). Worker threads and child processes cannot go
 * through jest's transform, so they load the compiled files in dist/ that the
 * same `pretest` build produces (see src/common/compiled-entry.ts).
 * @type {import('jest').Config}
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { diagnostics: false }],
  },
  // Definitions import 'kafka-lance'; the CLI resolves it to itself, jest needs telling.
  moduleNameMapper: { '^kafka-lance$': '<rootDir>/src/index.ts' },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 120_000,
  // Integration tests share one broker and two cores: two jest workers keep the broker responsive.
  maxWorkers: 2,
  verbose: true,
  // Names a test file that runs for minutes: a hang otherwise shows only as CI's time limit.
  reporters: ['default', '<rootDir>/test/support/slow-suite-reporter.js'],
};
