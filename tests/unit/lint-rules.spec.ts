/**
 * Lint keeps the suite honest (eslint.tests.mjs): a test asserts, never only under a condition, awaits its
 * async assertions, and runs unconditionally. Two checks, in one child process (Jest's module sandbox cannot
 * load ESM config files):
 *  - the repository's eslint.config.mjs gives every test file jest runs exactly the rule settings of
 *    eslint.tests.mjs (computed, not linted: no type information needed);
 *  - those settings, with the TypeScript parser only, report each banned construct and leave a clean test alone.
 *    (Type-aware linting of a tests/ file would build the whole tests/ program; these rules need no types.)
 */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';

const REPO_ROOT = join(__dirname, '..', '..');

/** Every file a jest tier runs (jest.config.js: `*.spec.ts`, and the other tiers by suffix under tests/), relative to the repository root. */
function testFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!['node_modules', 'dist', '.stack', '.nx', 'coverage', 'test-artifacts'].includes(entry.name)) walk(join(dir, entry.name));
      } else {
        const file = relative(REPO_ROOT, join(dir, entry.name));
        if (/\.spec\.ts$/.test(file) || /^tests\/.*\.(e2e|browser|fault|secure|compose|workflow)\.ts$/.test(file)) found.push(file);
      }
    }
  };
  for (const top of ['apps', 'libs', 'tests']) walk(join(REPO_ROOT, top));
  return found.sort();
}

const CHILD = `
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { TEST_RULES, testRulesConfig } from './eslint.tests.mjs';

const { files, snippets } = JSON.parse(process.argv[1]);
const severity = (entry) => { const level = Array.isArray(entry) ? entry[0] : entry; return { off: 0, warn: 1, error: 2 }[level] ?? level; };
const normalise = (entry) => (Array.isArray(entry) ? [severity(entry), ...entry.slice(1)] : [severity(entry)]);

const real = new ESLint({ cwd: process.cwd() });
const expected = Object.fromEntries(Object.entries(TEST_RULES).map(([rule, entry]) => [rule, normalise(entry)]));
const wiring = {};
for (const file of files) {
  const config = await real.calculateConfigForFile(file);
  const rules = Object.fromEntries(Object.keys(TEST_RULES).map((rule) => [rule, config?.rules?.[rule] && normalise(config.rules[rule])]));
  wiring[file] = JSON.stringify(rules) === JSON.stringify(expected) ? 'same' : rules;
}

const subset = new ESLint({
  cwd: process.cwd(),
  overrideConfigFile: true,
  overrideConfig: [{ files: ['**/*.ts'], languageOptions: { parser: tseslint.parser } }, testRulesConfig],
});
const reported = {};
for (const [name, code] of Object.entries(snippets)) {
  const [result] = await subset.lintText(code, { filePath: 'tests/e2e/lint-rules-snippet.e2e.ts' });
  reported[name] = result.messages.map((m) => m.ruleId ?? 'fatal: ' + m.message);
}
process.stdout.write('\\nlint-result ' + JSON.stringify({ wiring, reported }) + '\\n');
`;

/** Each snippet, and the rules it must be reported by (once per finding). */
const CASES: Record<string, { code: string; rules: string[] }> = {
  'a conditional describe': {
    code: "(process.env.CI ? describe : describe.skip)('suite', () => {\n  it('asserts', () => expect(1).toBe(1));\n});\n",
    rules: ['no-restricted-syntax'],
  },
  'a conditional it, chosen once and called later': {
    code: "const maybe = process.env.TOOL ? it : it.skip;\nmaybe('asserts', () => expect(1).toBe(1));\n",
    rules: ['no-restricted-syntax'],
  },
  'an it under an if': {
    code: "describe('suite', () => {\n  if (process.env.TOOL) {\n    it('asserts', () => expect(1).toBe(1));\n  }\n});\n",
    // The if in a describe's body, and the it under it.
    rules: ['no-restricted-syntax', 'no-restricted-syntax'],
  },
  'a describe under a condition': {
    code: "process.env.TOOL && describe('suite', () => {\n  it('asserts', () => expect(1).toBe(1));\n});\n",
    // The describe, and the it within it: both run only under the condition.
    rules: ['no-restricted-syntax', 'no-restricted-syntax'],
  },
  'a describe body that returns early': {
    code: "describe('suite', () => {\n  if (!process.env.TOOL) return;\n  it('asserts', () => expect(1).toBe(1));\n});\n",
    rules: ['no-restricted-syntax'],
  },
  'a skipIf-like member': {
    code: "describe.skipIf(!process.env.TOOL)('suite', () => {\n  it('asserts', () => expect(1).toBe(1));\n});\n",
    rules: ['no-restricted-syntax'],
  },
  'a test that returns before its assertions': {
    code: "it('asserts', () => {\n  const x = Number(process.env.X);\n  if (!x) return;\n  expect(x).toBe(1);\n});\n",
    rules: ['no-restricted-syntax'],
  },
  'an expect inside an if': {
    code: "it('asserts', () => {\n  const x = Number(process.env.X);\n  expect(x).toBeGreaterThanOrEqual(0);\n  if (x > 1) expect(x).toBe(2);\n});\n",
    rules: ['jest/no-conditional-expect'],
  },
  'an expect inside a catch': {
    code: "it('throws', () => {\n  try {\n    JSON.parse('{');\n  } catch (err) {\n    expect(err).toBeInstanceOf(SyntaxError);\n  }\n});\n",
    rules: ['jest/no-conditional-expect'],
  },
  'a test with no assertion': {
    code: "it('does something', async () => {\n  await Promise.resolve(1);\n});\n",
    rules: ['jest/expect-expect'],
  },
  'a test whose only call is a helper that is not a listed assertion': {
    code: "const check = (n: number) => n > 0;\nit('checks', () => {\n  check(1);\n});\n",
    rules: ['jest/expect-expect'],
  },
  'an un-awaited expect(...).resolves': {
    code: "it('resolves', async () => {\n  expect(Promise.resolve(1)).resolves.toBe(1);\n});\n",
    rules: ['jest/valid-expect'],
  },
  'a returned expect(...).resolves in a block (alwaysAwait)': {
    code: "it('resolves', () => {\n  const p = Promise.resolve(1);\n  return expect(p).resolves.toBe(1);\n});\n",
    rules: ['jest/valid-expect'],
  },
  'a clean suite': {
    code: [
      "declare function expectRefused(archive: Buffer, reason: string): Promise<void>;",
      "declare const fc: { assert(property: unknown): void; property(...args: unknown[]): unknown };",
      "describe('suite', () => {",
      "  const cases = [1, 2, 3];",
      "  it('asserts', async () => {",
      "    const x = cases.find((c) => c > 1);",
      "    expect(x).not.toBeUndefined();",
      "    expect(x! * 2).toBe(4);",
      "    await expect(Promise.resolve(1)).resolves.toBe(1);",
      "    for (const c of cases) expect(c).toBeGreaterThan(0);",
      "  });",
      "  it.each(cases)('case %s', (c) => expect(c).toBeLessThan(4));",
      "  it('asserts through a listed helper', async () => {",
      "    await expectRefused(Buffer.alloc(0), 'path_escape');",
      "  });",
      "  it('asserts through fc.assert, whose property throws on a counterexample', () => {",
      "    fc.assert(fc.property(cases, (c: number) => { if (c < 0) throw new Error('negative'); }));",
      "  });",
      "  it('returns its assertion from an arrow', () => expect(Promise.resolve(2)).resolves.toBe(2));",
      "});",
      '',
    ].join('\n'),
    rules: [],
  },
};

describe('lint rules for test files', () => {
  let result: { wiring: Record<string, unknown>; reported: Record<string, string[]> };
  const files = testFiles();

  beforeAll(async () => {
    const snippets = Object.fromEntries(Object.entries(CASES).map(([name, { code }]) => [name, code]));
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', CHILD, JSON.stringify({ files, snippets })], {
      cwd: REPO_ROOT,
      // As when Nx runs lint: the config then skips computing the project graph, which these rules do not need.
      env: { ...process.env, NX_DAEMON: 'false', NX_TASK_TARGET_PROJECT: 'tests' },
      maxBuffer: 16 * 1024 * 1024,
    });
    // Nx may print warnings of its own (e.g. about its project-graph cache) before the result line.
    const line = stdout.split('\n').find((l) => l.startsWith('lint-result '));
    result = JSON.parse(line?.slice('lint-result '.length) ?? 'null');
  }, 60_000);

  it('applies the settings of eslint.tests.mjs to every test file of every tier', () => {
    // Every tier has files here, so none of its suffixes can slip out of the file globs unnoticed.
    for (const suffix of ['spec', 'e2e', 'browser', 'fault', 'secure', 'compose', 'workflow']) {
      expect({ suffix, files: files.some((f) => f.endsWith(`.${suffix}.ts`)) }).toEqual({ suffix, files: true });
    }
    expect(result.wiring).toEqual(Object.fromEntries(files.map((file) => [file, 'same'])));
  });

  it.each(Object.entries(CASES))('%s', (name, { rules }) => {
    expect(result.reported[name]).toEqual(rules);
  });
});
