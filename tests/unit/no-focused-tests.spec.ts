/**
 * Lint refuses focused and disabled tests: a stray `.only` or `.skip` would otherwise turn a tier green
 * without running most of it. Lints a real file with the repository's own ESLint config, through the
 * ESLint Node API in a child process (Jest's module sandbox cannot load an ESM config file).
 */
import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const REPO_ROOT = join(__dirname, '..', '..');

const LINT_ONE_FILE = `
const { ESLint } = require('eslint');
new ESLint({ cwd: process.cwd() })
  .lintFiles([process.argv[1]])
  .then(([result]) => process.stdout.write('\\nlint-result ' + JSON.stringify(result.messages.map((m) => ({ line: m.line, rule: m.ruleId, severity: m.severity })))));
`;

describe('lint and focused or disabled tests', () => {
  // A spec file beside a lib's sources is type-checked in ESLint's small default project, which keeps this quick.
  const file = join(REPO_ROOT, 'libs', 'config', 'src', `focused-${process.pid}.spec.ts`);
  afterAll(() => rmSync(file, { force: true }));

  it('reports it.only, describe.skip, xit and test.todo as errors, and leaves a plain test alone', async () => {
    writeFileSync(
      file,
      // Spelled in pieces so that a text search for focused tests in this repository finds the real ones, not these.
      [
        `it.${'only'}('runs alone', () => expect(1).toBe(1));`,
        `describe.${'skip'}('never runs', () => undefined);`,
        `${'x'}it('never runs either', () => expect(1).toBe(1));`,
        "test.todo('some day');",
        "it('is an ordinary test', () => expect(1).toBe(1));",
        '',
      ].join('\n'),
    );
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', LINT_ONE_FILE, file], {
      cwd: REPO_ROOT,
      // As when Nx runs lint: the config then skips computing the project graph, which these rules do not need.
      env: { ...process.env, NX_DAEMON: 'false', NX_TASK_TARGET_PROJECT: 'config' },
    });
    // Nx may print warnings of its own (e.g. about its project-graph cache) before the result line.
    const resultLine = stdout.split('\n').find((line) => line.startsWith('lint-result '));
    expect(JSON.parse(resultLine?.slice('lint-result '.length) ?? 'null')).toEqual([
      { line: 1, rule: 'jest/no-focused-tests', severity: 2 },
      { line: 2, rule: 'jest/no-disabled-tests', severity: 2 },
      { line: 3, rule: 'jest/no-disabled-tests', severity: 2 },
      { line: 4, rule: 'no-restricted-properties', severity: 2 },
    ]);
  }, 60_000);
});
