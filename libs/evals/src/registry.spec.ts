import { compileJsonSchema, EvalSpecError, normaliseScorers, normaliseSolver, pairingProblem, parseFileChecks } from './registry';

const scorerProblem = (input: unknown): string => {
  try {
    normaliseScorers(input);
  } catch (err) {
    expect(err).toBeInstanceOf(EvalSpecError);
    return (err as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(input)}`);
};

const solverProblem = (input: unknown): string => {
  try {
    normaliseSolver(input);
  } catch (err) {
    expect(err).toBeInstanceOf(EvalSpecError);
    return (err as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(input)}`);
};

describe('normaliseScorers', () => {
  it('takes names and objects, and returns each with only the options given', () => {
    expect(
      normaliseScorers([
        'exact',
        { name: 'includes' },
        { name: 'regex', pattern: '#\\d+', flags: 'im' },
        { name: 'numeric', tolerance: 0.5 },
        'choice',
        { name: 'json', schema: { type: 'object', required: ['a'] } },
        { name: 'files', checks: [{ path: 'out.md', contains: 'done' }, { path: 'tmp.txt', exists: false }] },
        { name: 'model_graded', rubric: 'Must name the city.', model: 'judge-1', endpoint: 'judge' },
      ]),
    ).toEqual([
      { name: 'exact' },
      { name: 'includes' },
      { name: 'regex', pattern: '#\\d+', flags: 'im' },
      { name: 'numeric', tolerance: 0.5 },
      { name: 'choice' },
      { name: 'json', schema: { type: 'object', required: ['a'] } },
      { name: 'files', checks: [{ path: 'out.md', contains: 'done' }, { path: 'tmp.txt', exists: false }] },
      { name: 'model_graded', rubric: 'Must name the city.', model: 'judge-1', endpoint: 'judge' },
    ]);
    expect(normaliseScorers(['numeric', 'files', 'model_graded', 'json'])).toEqual([{ name: 'numeric' }, { name: 'files' }, { name: 'model_graded' }, { name: 'json' }]);
  });

  it('lists the valid scorers when one is unknown', () => {
    const valid = 'valid scorers are exact, includes, regex, numeric, choice, json, files, model_graded';
    expect(scorerProblem(['exact', 'foo'])).toBe(`unknown scorer 'foo': ${valid}`);
    expect(scorerProblem([{ name: 'bleu' }])).toBe(`unknown scorer 'bleu': ${valid}`);
    expect(scorerProblem([{ pattern: 'x' }])).toBe(`scorers[0] has no 'name': ${valid}`);
    expect(scorerProblem([3])).toBe(`scorers[0] must be a scorer name or an object with a 'name': ${valid}`);
    expect(scorerProblem('exact')).toBe(`scorers must be a list of scorer names or objects: ${valid}`);
    expect(scorerProblem([])).toBe(`scorers must name at least one scorer: ${valid}`);
  });

  it('says which option is wrong', () => {
    expect(scorerProblem([{ name: 'exact', pattern: 'x' }])).toBe("scorer 'exact': unknown option 'pattern' (it takes no options)");
    expect(scorerProblem([{ name: 'regex' }])).toBe("scorer 'regex': 'pattern' is required");
    expect(scorerProblem([{ name: 'regex', pattern: '(' }])).toMatch(/^scorer 'regex': 'pattern' is not a regular expression \(/);
    expect(scorerProblem([{ name: 'regex', pattern: 'x', flags: 'g' }])).toBe("scorer 'regex': 'flags' must be a string of distinct flags from i, m, s, u, v");
    expect(scorerProblem([{ name: 'regex', pattern: 'x', flags: 'ii' }])).toMatch(/'flags' must be/);
    expect(scorerProblem([{ name: 'regex', pattern: 'x', flag: 'i' }])).toBe("scorer 'regex': unknown option 'flag' (its options are pattern, flags)");
    expect(scorerProblem([{ name: 'numeric', tolerance: -1 }])).toBe("scorer 'numeric': 'tolerance' must be a number >= 0");
    expect(scorerProblem([{ name: 'numeric', tolerance: '0.1' }])).toBe("scorer 'numeric': 'tolerance' must be a number >= 0");
    expect(scorerProblem([{ name: 'json', schema: 'object' }])).toBe("scorer 'json': 'schema' must be a JSON Schema object");
    expect(scorerProblem([{ name: 'json', schema: { type: 'strnig' } }])).toMatch(/^scorer 'json': 'schema' is not a valid JSON Schema \(/);
    expect(scorerProblem([{ name: 'json', schema: { $ref: 'http://example.invalid/schema.json' } }])).toMatch(/^scorer 'json': 'schema' is not a valid JSON Schema \(.*resolve/);
    expect(scorerProblem([{ name: 'files', checks: [{ path: '/abs' }] }])).toBe("scorer 'files': 'checks[0].path' is absolute (it must be relative to the workspace)");
    expect(scorerProblem([{ name: 'model_graded', endpoint: 'file:///etc/passwd' }])).toBe("scorer 'model_graded': 'endpoint' must name a configured model endpoint (like 'default')");
    expect(scorerProblem([{ name: 'model_graded', rubric: '' }])).toMatch(/^scorer 'model_graded': 'rubric' must be a non-empty string/);
  });

  it('refuses a scorer named twice, since scores are reported by name', () => {
    expect(scorerProblem(['exact', { name: 'exact' }])).toBe("scorer 'exact' is listed twice");
  });
});

describe('parseFileChecks', () => {
  it('reads checks, and refuses a contradiction or a bad pattern', () => {
    expect(parseFileChecks([{ path: 'a.json', exists: true, contains: '"rows"', matches: '^\\{' }])).toEqual([{ path: 'a.json', exists: true, contains: '"rows"', matches: '^\\{' }]);
    expect(() => parseFileChecks([{ path: 'a', exists: false, contains: 'x' }])).toThrow("'checks[0]' says the file must not exist, so it cannot also ask what it contains");
    expect(() => parseFileChecks([{ path: 'a', matches: '[' }])).toThrow(/^'checks\[0\].matches' is not a regular expression/);
    expect(() => parseFileChecks([{ path: 'a', exists: 'yes' }])).toThrow("'checks[0].exists' must be true or false");
    expect(() => parseFileChecks([{ path: 'a', contains: '' }])).toThrow(/'checks\[0\].contains' must be a non-empty string/);
    expect(() => parseFileChecks([{ exists: true }])).toThrow("'checks[0].path' must be a string");
    expect(() => parseFileChecks('a.md')).toThrow("'checks' must be a list of 1 to 200 file checks");
  });
});

describe('compileJsonSchema', () => {
  it('compiles a schema once, whatever order its keys are in', () => {
    const a = compileJsonSchema({ type: 'object', required: ['n'], properties: { n: { type: 'integer' } } });
    const b = compileJsonSchema({ properties: { n: { type: 'integer' } }, required: ['n'], type: 'object' });
    expect(b).toBe(a);
    expect(a({ n: 3 })).toBeUndefined();
    expect(a({ n: 'three' })).toBe('n must be integer');
    expect(a({})).toBe("the value must have required property 'n'");
  });

  it('keeps two schemas with the same $id apart', () => {
    const a = compileJsonSchema({ $id: 'https://example.invalid/s', type: 'string' });
    const b = compileJsonSchema({ $id: 'https://example.invalid/s', type: 'number' });
    expect(a('x')).toBeUndefined();
    expect(b(1)).toBeUndefined();
    expect(b('x')).toBe('the value must be number');
  });

  it('knows the common formats', () => {
    const email = compileJsonSchema({ type: 'string', format: 'email' });
    expect(email('a@b.example')).toBeUndefined();
    expect(email('not an address')).toBe('the value must match format "email"');
  });
});

describe('normaliseSolver', () => {
  it('takes a name or an object with options', () => {
    expect(normaliseSolver('generate')).toEqual({ name: 'generate' });
    expect(normaliseSolver({ name: 'generate', system_prompt: 'Be brief.', temperature: 0, max_tokens: 256 })).toEqual({
      name: 'generate',
      system_prompt: 'Be brief.',
      temperature: 0,
      max_tokens: 256,
    });
    expect(normaliseSolver({ name: 'agent', max_steps: 200, policy: 'scripted' })).toEqual({ name: 'agent', max_steps: 200, policy: 'scripted' });
    expect(normaliseSolver('agent')).toEqual({ name: 'agent' });
    expect(normaliseSolver({ name: 'synthetic', fail_fraction: 0.25 })).toEqual({ name: 'synthetic', fail_fraction: 0.25 });
  });

  it('lists the valid solvers, and says which option is wrong', () => {
    const valid = 'valid solvers are generate, agent, synthetic';
    expect(solverProblem('chain')).toBe(`unknown solver 'chain': ${valid}`);
    expect(solverProblem(undefined)).toBe(`solver must be a solver name or an object with a 'name': ${valid}`);
    expect(solverProblem({ name: 'generate', temperature: 2.5 })).toBe("solver 'generate': 'temperature' must be a number from 0 to 2");
    expect(solverProblem({ name: 'generate', max_tokens: 0 })).toBe("solver 'generate': 'max_tokens' must be an integer from 1 to 32768");
    expect(solverProblem({ name: 'generate', max_tokens: 32769 })).toBe("solver 'generate': 'max_tokens' must be an integer from 1 to 32768");
    expect(solverProblem({ name: 'agent', max_steps: 1.5 })).toBe("solver 'agent': 'max_steps' must be an integer from 1 to 200");
    expect(solverProblem({ name: 'agent', policy: 'random' })).toBe("solver 'agent': 'policy' must be 'llm' or 'scripted'");
    expect(solverProblem({ name: 'agent', temperature: 0 })).toBe("solver 'agent': unknown option 'temperature' (its options are max_steps, policy)");
    expect(solverProblem({ name: 'synthetic', fail_fraction: 1.01 })).toBe("solver 'synthetic': 'fail_fraction' must be a number from 0 to 1");
  });
});

describe('pairingProblem', () => {
  it('refuses file checks on a solver that has no workspace', () => {
    expect(pairingProblem({ name: 'generate' }, [{ name: 'exact' }, { name: 'files' }])).toMatch(/solver 'generate' has none/);
    expect(pairingProblem({ name: 'agent' }, [{ name: 'files' }])).toBeUndefined();
    expect(pairingProblem({ name: 'generate' }, [{ name: 'exact' }])).toBeUndefined();
  });
});

describe("a JSON Schema's patterns", () => {
  it('match as usual, and one that backtracks without bound is stopped at the time limit', () => {
    const check = compileJsonSchema({ type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]{3}$' } } });
    expect(check({ code: 'ABC' })).toBeUndefined();
    expect(check({ code: 'abc' })).toMatch(/pattern/);
    const runaway = compileJsonSchema({ type: 'string', pattern: '(a+)+$' });
    expect(() => runaway(`${'a'.repeat(40)}b`)).toThrow(/took longer than 250 ms/);
  });
});
