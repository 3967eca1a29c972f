// @ts-check
/**
 * Flat ESLint config for the whole monorepo.
 *
 * - Type-aware typescript-eslint (projectService: each file is checked against the tsconfig.json of its
 *   app/lib, so `@agentrun/*` imports resolve through the libs' built `dist/*.d.ts`; build first with
 *   `npx tsc -b tsconfig.build.json`, or lint through Nx, whose lint target depends on `^build`).
 * - `@nx/enforce-module-boundaries` driven by the tags in each project.json.
 * - No focused or disabled tests (`.only`, `.skip`, `fit`, `xit`, `test.todo`, ...) anywhere.
 * - Test files (eslint.tests.mjs): every test asserts, never only under a condition, awaits its async
 *   assertions, and runs unconditionally (no `cond ? describe : describe.skip`, no `if (...) it(...)`).
 * - Workflow code (libs/workflows/src) may import only `@temporalio/workflow`, `@agentrun/contracts` and
 *   relative files: it runs in Temporal's deterministic sandbox and is bundled by webpack. Its functions stay
 *   under 150 lines: a workflow is a thin function over small units (state, handlers, steps, lifecycle).
 */
import { existsSync } from 'node:fs';
import { builtinModules } from 'node:module';
import eslint from '@eslint/js';
import nx from '@nx/eslint-plugin';
import { createProjectGraphAsync } from '@nx/devkit';
import jest from 'eslint-plugin-jest';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';
import { testRulesConfig } from './eslint.tests.mjs';

// `@nx/enforce-module-boundaries` only reads Nx's *cached* project graph and silently skips itself
// ("No cached ProjectGraph is available") when there is none, e.g. a fresh clone linted with plain
// `npx eslint`. Refresh the cache here unless Nx itself launched us (it computed the graph already).
if (!process.env.NX_TASK_TARGET_PROJECT) {
  process.env.NX_DAEMON ??= 'false';
  try {
    await createProjectGraphAsync({ exitOnError: false });
  } catch (error) {
    console.warn(`eslint.config.mjs: could not compute the Nx project graph: ${String(error)}`);
  }
}

const TS_FILES = ['apps/**/*.ts', 'libs/**/*.ts', 'libs/**/*.tsx', 'tests/**/*.ts'];

// Files that no tsconfig.json includes (the app/lib tsconfigs exclude `*.spec.ts`; tests/ has no tsconfig
// yet) are type-checked in the project service's default project, built from tsconfig.base.json. Its globs
// may not contain `**`, hence the explicit depths. Once a tests/tsconfig.json exists the project service
// finds it by itself, and listing tests/ here too would be an error, so it is dropped automatically.
const here = (file) => new URL(file, import.meta.url);
const DEFAULT_PROJECT_FILES = [
  ...['apps', 'libs'].flatMap((dir) => [`${dir}/*/src/*.spec.ts`, `${dir}/*/src/*/*.spec.ts`, `${dir}/*/src/*/*/*.spec.ts`]),
  ...(existsSync(here('./tests/tsconfig.json')) ? [] : ['tests/*.ts', 'tests/*/*.ts', 'tests/*/*/*.ts']),
];

// ---------------------------------------------------------------------------------------------
// Import bans for workflow code.
// ---------------------------------------------------------------------------------------------
const WHY =
  'Workflow code runs in the Temporal workflow sandbox: it must stay deterministic and bundle-safe.';
const nodeBuiltins = [...new Set(builtinModules.filter((m) => !m.startsWith('_')))];
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const builtinAlternation = nodeBuiltins.map(escapeRe).join('|');

/** @type {import('eslint').Linter.RulesRecord[string]} */
const workflowImportBans = [
  'error',
  {
    paths: [
      { name: 'typeorm', message: `${WHY} Database access belongs in an activity (libs/activities).` },
      { name: 'pg', message: `${WHY} Database access belongs in an activity (libs/activities).` },
      { name: 'kafkajs', message: `${WHY} Kafka I/O belongs in an activity (libs/activities).` },
    ],
    patterns: [
      {
        // `node:fs`, `node:crypto`, ... and the bare names (`fs`, `path`, `crypto`, `fs/promises`, ...).
        regex: `^(node:.*|(${builtinAlternation})(/.*)?)$`,
        caseSensitive: true,
        message: `${WHY} Node builtins are not available there and are non-deterministic (I/O, clock, randomness); do this in an activity.`,
      },
      {
        regex: '^@nestjs/',
        caseSensitive: true,
        message: `${WHY} NestJS (DI, I/O) belongs in the apps or in activities, never in workflow code.`,
      },
      {
        // Type-only imports are erased at compile time, so they cannot leak into the workflow bundle.
        regex: '^@temporalio/(?!workflow(/|$))',
        caseSensitive: true,
        allowTypeImports: true,
        message: `${WHY} Import values from '@temporalio/workflow' only; client/worker/activity/common pull in Node-only code (type-only imports are fine).`,
      },
      {
        regex: '^@agentrun/(?!contracts$)',
        caseSensitive: true,
        message: `${WHY} Of the @agentrun libs only '@agentrun/contracts' (its root entry point) may be imported by workflow code.`,
      },
      {
        // Everything else that is neither relative nor one of the groups above.
        regex: `^(?!\\.{1,2}(/|$)|@temporalio/workflow(/|$)|@agentrun/contracts$|@temporalio/|@agentrun/|@nestjs/|node:|(typeorm|pg|kafkajs|${builtinAlternation})(/|$))`,
        caseSensitive: true,
        message: `${WHY} Only '@temporalio/workflow', '@agentrun/contracts' and relative imports are allowed here.`,
      },
    ],
  },
];

export default tseslint.config(
  {
    name: 'agentrun/ignores',
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '.stack/**',
      '.nx/**',
      'coverage/**',
      'test-artifacts/**',
      '**/*.d.ts',
    ],
  },
  {
    name: 'agentrun/nx',
    plugins: { '@nx': nx },
  },
  {
    name: 'agentrun/typescript',
    files: TS_FILES,
    extends: [eslint.configs.recommended, ...tseslint.configs.recommended],
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: DEFAULT_PROJECT_FILES,
          defaultProject: 'tsconfig.base.json',
          maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 200,
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      'no-console': 'off',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { attributes: false } }],
      '@typescript-eslint/await-thenable': 'error',
      '@nx/enforce-module-boundaries': [
        'error',
        {
          allow: [],
          enforceBuildableLibDependency: false,
          depConstraints: [
            // Workflow code sees only the contracts.
            { sourceTag: 'scope:workflows', onlyDependOnLibsWithTags: ['scope:contracts'] },
            // The contracts are the leaf of the graph: they depend on no project at all.
            { sourceTag: 'scope:contracts', onlyDependOnLibsWithTags: [] },
            // Libraries never reach into apps.
            { sourceTag: 'type:lib', onlyDependOnLibsWithTags: ['type:lib'], notDependOnLibsWithTags: ['type:app'] },
            // Infrastructure adapters (config/kafka/persistence/runtime) sit below the domain libs.
            { sourceTag: 'layer:infra', notDependOnLibsWithTags: ['layer:domain'] },
            // The dashboard runs in a browser: of our libs it may use only the contracts.
            { sourceTag: 'layer:ui', onlyDependOnLibsWithTags: ['scope:contracts'] },
            // Apps compose libraries; they never import another app.
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:lib'], notDependOnLibsWithTags: ['type:app'] },
          ],
        },
      ],
    },
  },
  {
    // A focused or disabled test turns a suite green without running it; none may land.
    name: 'agentrun/no-focused-or-disabled-tests',
    files: TS_FILES,
    plugins: { jest },
    rules: {
      'jest/no-focused-tests': 'error',
      'jest/no-disabled-tests': 'error',
      'no-restricted-properties': [
        'error',
        ...['it', 'test', 'describe'].map((object) => ({ object, property: 'todo', message: 'A todo test is a test that never runs: write it or leave it out.' })),
      ],
    },
  },
  // A test asserts, unconditionally, and runs unconditionally (the settings and why: eslint.tests.mjs).
  testRulesConfig,
  {
    name: 'agentrun/workflow-sandbox',
    files: ['libs/workflows/src/**/*.ts'],
    ignores: ['**/*.spec.ts', '**/*.test.ts'],
    rules: {
      'no-restricted-imports': 'off',
      '@typescript-eslint/no-restricted-imports': workflowImportBans,
      'max-lines-per-function': ['error', { max: 150, skipBlankLines: true, skipComments: true }],
    },
  },
  prettier,
);
