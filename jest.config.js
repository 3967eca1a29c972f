/**
 * Tiers, split by file name: `*.spec.ts` are unit tests, `tests/workflows/*.workflow.ts` run the workflow
 * code in-process on a Temporal dev server of their own (activities replaced by doubles), `tests/e2e/*.e2e.ts`
 * run against the real stack, and `tests/browser/*.browser.ts` drive the dashboard in Chromium against it.
 * `tests/model-real/*.spec.ts` run a real small language model on the CPU (no stack; not part of `unit`).
 */
const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
  },
];

const shared = {
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper: {
    '^@agentrun/contracts/validation$': '<rootDir>/libs/contracts/src/validation.ts',
    '^@agentrun/([a-z-]+)$': '<rootDir>/libs/$1/src',
  },
  testEnvironment: 'node',
  modulePathIgnorePatterns: ['<rootDir>/.stack/', '<rootDir>/dist/', '<rootDir>/.*/dist/'],
};

module.exports = {
  // Files side by side (tests/run.sh's parallel pass): the longest start first.
  testSequencer: '<rootDir>/tests/support/sequencer.js',
  projects: [
    {
      ...shared,
      displayName: 'unit',
      testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts', '<rootDir>/tests/unit/**/*.spec.ts'],
    },
    {
      ...shared,
      displayName: 'workflows',
      testMatch: ['<rootDir>/tests/workflows/**/*.workflow.ts'],
      globalSetup: '<rootDir>/tests/support/workflow-tier.setup.ts',
      globalTeardown: '<rootDir>/tests/support/workflow-tier.teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/tests/support/workflow-tier.timeout.ts'],
      slowTestThreshold: 15,
    },
    {
      ...shared,
      displayName: 'e2e',
      testMatch: ['<rootDir>/tests/e2e/**/*.e2e.ts'],
      setupFilesAfterEnv: ['<rootDir>/tests/support/e2e-setup.ts'],
      slowTestThreshold: 60,
    },
    {
      ...shared,
      displayName: 'browser',
      testMatch: ['<rootDir>/tests/browser/**/*.browser.ts'],
      setupFilesAfterEnv: ['<rootDir>/tests/support/e2e-setup.ts'],
      slowTestThreshold: 60,
    },
    {
      ...shared,
      displayName: 'faults',
      testMatch: ['<rootDir>/tests/faults/**/*.fault.ts'],
      setupFilesAfterEnv: ['<rootDir>/tests/support/e2e-setup.ts'],
      slowTestThreshold: 120,
    },
    {
      ...shared,
      // Against the stack's secure profile (tests/run.sh restarts the stack in it for this tier).
      displayName: 'secure',
      testMatch: ['<rootDir>/tests/secure/**/*.secure.ts'],
      setupFilesAfterEnv: ['<rootDir>/tests/support/e2e-setup.ts'],
      slowTestThreshold: 120,
    },
    {
      ...shared,
      // The real-model server (SmolLM2 on the CPU) as a process of its own; no stack (npm run test:model-real).
      displayName: 'model-real',
      testMatch: ['<rootDir>/tests/model-real/**/*.spec.ts'],
      slowTestThreshold: 60,
    },
    {
      ...shared,
      // Against docker-compose.yml brought up by tests/compose/run.sh (npm run test:compose).
      displayName: 'compose',
      testMatch: ['<rootDir>/tests/compose/**/*.compose.ts'],
      setupFilesAfterEnv: ['<rootDir>/tests/support/e2e-setup.ts'],
      slowTestThreshold: 120,
    },
  ],
};
