// @ts-check
/**
 * Lint rules for test files, kept in a module of their own so that tests/unit/lint-rules.spec.ts checks these
 * very settings (eslint.config.mjs applies them to TEST_FILES). A test must assert, unconditionally, and
 * whether a test or suite runs may not depend on a condition: a test that can pass without checking anything
 * is worse than no test, because it reads as coverage.
 */
import jest from 'eslint-plugin-jest';

/** Every file jest runs as a test (jest.config.js): unit specs, and the tiers under tests/ by suffix. */
export const TEST_FILES = [
  '**/*.spec.ts',
  'tests/**/*.e2e.ts',
  'tests/**/*.browser.ts',
  'tests/**/*.fault.ts',
  'tests/**/*.secure.ts',
  'tests/**/*.compose.ts',
  'tests/**/*.workflow.ts',
];

/**
 * Functions a test may rely on as its assertion: each one calls `expect` on everything it promises to check.
 * Named one by one, not as `expect*`, so that a helper counts only once someone has looked at what it checks.
 */
export const ASSERT_FUNCTION_NAMES = [
  'expect',
  // libs/archive/src/restore.spec.ts: refused with a reason naming the entry, and nothing written anywhere.
  'expectRefused',
  // tests/e2e/bad-input.e2e.ts: an application/problem+json answer with the status and detail given.
  'expectProblem',
  // tests/e2e/resilience.e2e.ts: the run is done, with seqs 1..N on the topic and in the read model, effects once.
  'expectComplete',
  // tests/compose/platform.compose.ts: the run is done, with seqs 1..N on the topic and on the SSE stream.
  'expectCompleteRun',
  // tests/unit/compose-parity.spec.ts: the compose service publishes exactly that host port.
  'expectPublished',
  // fast-check's property runner: it throws (and so fails the test) on a counterexample, whatever the property
  // checks with — an expect, or a throw of its own.
  'fc.assert',
];

const BLOCK = '/^(describe|fdescribe|xdescribe|it|fit|xit|test|xtest)$/';
const TEST = '/^(it|fit|xit|test|xtest)$/';
const DESCRIBE = '/^(describe|fdescribe|xdescribe)$/';
/** `describe(...)`, `it.each(...)(...)`, `test.concurrent(...)`, `describe.each(...)(...)`. */
const blockCall = (names) => `CallExpression:matches([callee.name=${names}], [callee.object.name=${names}], [callee.callee.object.name=${names}])`;
/** `describe`, `it.skip`, `test.each`: the function itself, not a call of it. */
const blockRef = (prop) => `[${prop}.name=${BLOCK}], [${prop}.object.name=${BLOCK}]`;

const CONDITIONAL_TEST = 'Whether a test or suite runs may not depend on a condition: a skipped test passes without checking anything. Run it always (a test tier installs what its tests need), or leave it out.';

/** `no-restricted-syntax` selectors for a describe/it/test that runs only under some condition. */
export const CONDITIONAL_TEST_SELECTORS = [
  {
    // `(cond ? describe : describe.skip)(...)`, `const d = cond ? it : it.skip`
    selector: `ConditionalExpression:matches(${blockRef('consequent')}, ${blockRef('alternate')})`,
    message: CONDITIONAL_TEST,
  },
  {
    // `(cond && describe) || describe.skip`, `const t = enabled && it`
    selector: `LogicalExpression:matches(${blockRef('left')}, ${blockRef('right')})`,
    message: CONDITIONAL_TEST,
  },
  {
    // `if (cond) { it(...) }`, `cond && describe(...)`, `cond ? test(...) : undefined`, a case of a switch.
    selector: `:matches(IfStatement, SwitchCase, ConditionalExpression, LogicalExpression) ${blockCall(BLOCK)}`,
    message: CONDITIONAL_TEST,
  },
  {
    // `describe[cond ? 'skip' : 'only']`, and `describe.skipIf(...)`, `it.runIf(...)` and the like (jest has none,
    // other runners do): of describe/it/test only jest's own members.
    selector: `MemberExpression[object.name=${BLOCK}]:matches([computed=true], :not([property.name=/^(each|only|skip|todo|concurrent|failing)$/]))`,
    message: CONDITIONAL_TEST,
  },
  {
    // `const maybe = describe` (then called under a condition, out of lint's sight).
    selector: `VariableDeclarator:matches(${blockRef('init')})`,
    message: 'Call describe/it/test by their own names: an alias hides from lint whether the suite runs.',
  },
  {
    // `describe('x', () => { if (!tool) return; it(...) })`: the tests below the if run only when it is false.
    selector: `${blockCall(DESCRIBE)} > :function > BlockStatement > IfStatement`,
    message: CONDITIONAL_TEST,
  },
  {
    // `it('x', () => { if (!tool) return; expect(...) })`: a test that passes by returning before its assertions.
    selector: `${blockCall(TEST)} > :function > BlockStatement > IfStatement:matches([consequent.type='ReturnStatement'], [consequent.body.0.type='ReturnStatement'], [alternate.type='ReturnStatement'])`,
    message: 'A test may not return early under a condition: it would pass without its assertions. Assert the precondition instead (expect(...) fails the test).',
  },
];

/** @type {import('eslint').Linter.RulesRecord} */
export const TEST_RULES = {
  'jest/expect-expect': ['error', { assertFunctionNames: ASSERT_FUNCTION_NAMES }],
  'jest/no-conditional-expect': 'error',
  'jest/valid-expect': ['error', { alwaysAwait: true }],
  'no-restricted-syntax': ['error', ...CONDITIONAL_TEST_SELECTORS],
};

/** @type {import('eslint').Linter.Config} */
export const testRulesConfig = {
  name: 'agentrun/tests-assert-unconditionally',
  files: TEST_FILES,
  plugins: { jest },
  rules: TEST_RULES,
};
