import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listSuites, loadSuite, SUITE_NAMES, SuiteError, SUITES_DIR, type SuiteCase } from './suites';

const all = SUITE_NAMES.map((name) => loadSuite(name));
const casesOf = (name: string): SuiteCase[] => all.find((s) => s.manifest.name === name)!.cases;
const text = (c: SuiteCase): string => {
  if (typeof c.input !== 'string') throw new Error(`${c.id}: the shipped suites use string inputs`);
  return c.input;
};
const targets = (c: SuiteCase): string[] => (Array.isArray(c.target) ? c.target : [c.target]);

describe('shipped suites', () => {
  it('the manifest lists qa, mcq and agent with their solver, default scorers and case counts', () => {
    expect(listSuites().map(({ name, file, solver, scorers, cases }) => ({ name, file, solver, scorers, cases }))).toEqual([
      { name: 'qa', file: 'qa.jsonl', solver: 'generate', scorers: ['exact'], cases: 30 },
      { name: 'mcq', file: 'mcq.jsonl', solver: 'generate', scorers: ['choice'], cases: 20 },
      { name: 'agent', file: 'agent.jsonl', solver: 'agent', scorers: ['files'], cases: 8 },
    ]);
    for (const s of listSuites()) expect(s.description.length).toBeGreaterThan(20);
  });

  it('every case has an id, a string input and a target; ids and inputs are unique across the suites', () => {
    const ids = all.flatMap((s) => s.cases.map((c) => c.id));
    expect(new Set(ids).size).toBe(ids.length);
    // The model server recognises a case by its input alone.
    const inputs = all.flatMap((s) => s.cases.map((c) => text(c).trim()));
    expect(new Set(inputs).size).toBe(inputs.length);
    for (const c of all.flatMap((s) => s.cases)) {
      expect(c.id).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/);
      expect(targets(c).every((t) => typeof t === 'string' && t.trim() !== '')).toBe(true);
    }
  });

  it('qa: every arithmetic target is the value of its expression', () => {
    const arithmetic = casesOf('qa').filter((c) => c.metadata?.category === 'arithmetic');
    expect(arithmetic.length).toBeGreaterThanOrEqual(10);
    const operations: Record<string, (a: number, b: number) => number> = {
      '+': (a, b) => a + b,
      '-': (a, b) => a - b,
      '*': (a, b) => a * b,
      '/': (a, b) => a / b,
    };
    for (const c of arithmetic) {
      const m = /^What is (-?\d+) ([-+*/]) (-?\d+)\? Answer with the number only\.$/.exec(text(c));
      expect({ id: c.id, parsed: m !== null }).toEqual({ id: c.id, parsed: true });
      const value = operations[m![2]](Number(m![1]), Number(m![3]));
      expect(Number.isInteger(value)).toBe(true);
      expect({ id: c.id, target: c.target }).toEqual({ id: c.id, target: String(value) });
    }
  });

  it('qa: the rest are facts, several with more than one acceptable answer', () => {
    const qa = casesOf('qa');
    expect(qa.every((c) => c.metadata?.category === 'fact' || c.metadata?.category === 'arithmetic')).toBe(true);
    expect(qa.filter((c) => c.metadata?.category === 'fact').length).toBeGreaterThanOrEqual(15);
    expect(qa.filter((c) => Array.isArray(c.target) && c.target.length > 1).length).toBeGreaterThanOrEqual(3);
  });

  it('mcq: the input offers A-D once each and asks for the letter; the target is one of them', () => {
    const mcq = casesOf('mcq');
    for (const c of mcq) {
      const lines = text(c).split('\n');
      expect(lines[lines.length - 1]).toBe('Answer with the letter only.');
      const options = lines.filter((l) => /^[A-Z]\. /.test(l)).map((l) => l[0]);
      expect({ id: c.id, options }).toEqual({ id: c.id, options: ['A', 'B', 'C', 'D'] });
      expect({ id: c.id, target: c.target }).toEqual({ id: c.id, target: expect.stringMatching(/^[A-D]$/) });
      expect(options).toContain(c.target);
    }
    // No letter is the safe guess.
    const letters = mcq.map((c) => c.target as string);
    for (const letter of ['A', 'B', 'C', 'D']) expect(letters.filter((l) => l === letter).length).toBe(mcq.length / 4);
  });

  it('agent: each case seeds files, names a reference call the goal spells out, and checks only what a tool leaves', () => {
    const toolOutputs = /^(parsed|rerank|vision|vectors|notes\/step-\d+-search\.md$)/;
    for (const c of casesOf('agent')) {
      const goal = text(c);
      expect(Object.keys(c.files ?? {}).length).toBeGreaterThan(0);
      const call = c.metadata?.reference_call as { tool: string; args: Record<string, string> };
      expect(call).toEqual({ tool: expect.any(String), args: expect.any(Object) });
      for (const value of Object.values(call.args)) expect(goal).toContain(value);
      // A call that names a path names one of the seeded files.
      expect(Object.keys(c.files!)).toEqual(expect.arrayContaining(call.args.path === undefined ? [] : [call.args.path]));
      const checks = c.metadata?.checks as { path: string; exists?: boolean; contains?: string; matches?: string }[];
      expect(checks.length).toBeGreaterThan(0);
      for (const check of checks) {
        expect(Object.keys(c.files!)).not.toContain(check.path);
        expect(check.path).toMatch(toolOutputs);
        expect([check.exists, check.contains, check.matches].filter((v) => v !== undefined)).toHaveLength(1);
        expect(() => new RegExp(check.matches ?? '')).not.toThrow();
      }
    }
  });
});

describe('reading suites', () => {
  let dir: string;
  const manifest = (suites: unknown[]) => writeFile(join(dir, 'index.json'), JSON.stringify({ suites }));
  const entries = SUITE_NAMES.map((name) => ({ name, file: `${name}.jsonl`, description: 'a test suite', solver: 'generate', scorers: ['exact'] }));

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'suites-'));
    await manifest(entries);
    for (const name of SUITE_NAMES) await writeFile(join(dir, `${name}.jsonl`), '{"id":"a","input":"q","target":"t"}\n');
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('an unknown suite name is refused with the valid names', () => {
    expect(() => loadSuite('nope', dir)).toThrow(new SuiteError("unknown suite 'nope': the shipped suites are qa, mcq, agent"));
  });

  it('a bad line is reported with its file and line number; blank lines do not count', async () => {
    await writeFile(join(dir, 'qa.jsonl'), '{"id":"a","input":"q","target":"t"}\n\n{"id":"b","input":"q","target":7}\n');
    expect(() => loadSuite('qa', dir)).toThrow("qa.jsonl line 3: 'target' must be a string or a list of strings");
    await writeFile(join(dir, 'qa.jsonl'), '{"id":"a","input":"q","target":"t","extra":1}\n');
    expect(() => loadSuite('qa', dir)).toThrow("qa.jsonl line 1: unknown field 'extra'");
    await writeFile(join(dir, 'qa.jsonl'), '{"id":"a","input":"q","target":"t"}\n{"id":"a","input":"r","target":"t"}\n');
    expect(() => loadSuite('qa', dir)).toThrow("qa.jsonl line 2: duplicate id 'a' (first on line 1)");
    await writeFile(join(dir, 'qa.jsonl'), '{"id":"a",\n');
    expect(() => loadSuite('qa', dir)).toThrow(/qa\.jsonl line 1: not valid JSON/);
    await writeFile(join(dir, 'qa.jsonl'), '{"id":"a","input":[{"role":"robot","content":"x"}],"target":"t"}\n');
    expect(() => loadSuite('qa', dir)).toThrow("qa.jsonl line 1: 'input[0].role' must be one of system, user, assistant");
  });

  it('a missing file or manifest entry names what is missing', async () => {
    await rm(join(dir, 'mcq.jsonl'));
    expect(() => loadSuite('mcq', dir)).toThrow(`the shipped suites are incomplete: ${join(dir, 'mcq.jsonl')} is missing`);
    await manifest(entries.slice(1));
    expect(() => listSuites(dir)).toThrow(/must list each of qa, mcq, agent once \(missing: qa\)/);
    await manifest([...entries, entries[0]]);
    expect(() => listSuites(dir)).toThrow(/\(twice: qa\)/);
    await manifest(entries.map((e) => ({ ...e, solver: 'synthetic' })));
    expect(() => listSuites(dir)).toThrow(/suites\[0\]\.solver must be one of generate, agent/);
  });
});

describe('packaging', () => {
  it('the image copies the suites next to the compiled lib, where SUITES_DIR finds them', () => {
    const dockerfile = readFileSync(join(__dirname, '..', '..', '..', 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/tar -cf - [^\n]* libs\/\*\/dist libs\/evals\/suites /);
    expect(SUITES_DIR).toBe(join(__dirname, '..', 'suites'));
  });
});
