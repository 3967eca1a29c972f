import { createHash } from 'node:crypto';
import {
  canonicalJsonl,
  caseText,
  datasetId,
  DatasetError,
  MAX_FILE_BYTES,
  MAX_INPUT_BYTES,
  parseCase,
  parseDatasetLines,
  parseDatasetText,
  type EvalCase,
} from './dataset';

const problem = (value: unknown): string => {
  try {
    parseCase(value, 'line 7');
  } catch (err) {
    expect(err).toBeInstanceOf(DatasetError);
    return (err as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(value)}`);
};

async function* linesOf(...lines: string[]): AsyncIterable<string> {
  for (const line of lines) yield line;
}

describe('parseCase', () => {
  it('accepts a question with one answer, with several, and a chat conversation', () => {
    expect(parseCase({ id: 'q1', input: 'Capital of France?', target: 'Paris' }, 'x')).toEqual({ id: 'q1', input: 'Capital of France?', target: 'Paris' });
    expect(parseCase({ id: 'q.2_b-3', input: 'Name a primary colour', target: ['red', 'blue', 'yellow'], metadata: { level: 1 } }, 'x')).toEqual({
      id: 'q.2_b-3',
      input: 'Name a primary colour',
      target: ['red', 'blue', 'yellow'],
      metadata: { level: 1 },
    });
    const turns = [
      { role: 'system', content: 'Answer tersely.' },
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello.' },
      { role: 'user', content: '2+2?' },
    ];
    expect(parseCase({ id: 'chat', input: turns, target: '4' }, 'x').input).toEqual(turns);
  });

  it('names the line and the field in every refusal', () => {
    expect(problem({ id: 'q1', input: 'x', target: 7 })).toBe("line 7: 'target' must be a string or a list of strings");
    expect(problem([1])).toMatch(/^line 7: a case must be a JSON object/);
    expect(problem({ input: 'x', target: 'y' })).toBe("line 7: 'id' is required");
    expect(problem({ id: 'q1', target: 'y' })).toBe("line 7: 'input' is required");
    expect(problem({ id: 'q1', input: 'x' })).toBe("line 7: 'target' is required");
    expect(problem({ id: 'q1', input: 'x', target: 'y', answer: 'z' })).toBe("line 7: unknown field 'answer' (a case has id, input, target, metadata, files)");
  });

  it('refuses ids outside the pattern', () => {
    for (const id of ['', '-a', '.a', 'a b', 'a/b', 'x'.repeat(64), 5]) expect(problem({ id, input: 'x', target: 'y' })).toMatch(/^line 7: 'id' must be 1 to 63/);
    expect(parseCase({ id: 'A'.repeat(63), input: 'x', target: 'y' }, 'x').id).toHaveLength(63);
  });

  it('refuses an empty, oversized or malformed input', () => {
    expect(problem({ id: 'q', input: '  ', target: 'y' })).toBe("line 7: 'input' is empty");
    expect(problem({ id: 'q', input: 'é'.repeat(MAX_INPUT_BYTES / 2 + 1), target: 'y' })).toBe(`line 7: 'input' is more than ${MAX_INPUT_BYTES} bytes`);
    expect(parseCase({ id: 'q', input: 'é'.repeat(MAX_INPUT_BYTES / 2), target: 'y' }, 'x').id).toBe('q');
    expect(problem({ id: 'q', input: [], target: 'y' })).toBe("line 7: 'input' must have 1 to 100 chat turns");
    expect(problem({ id: 'q', input: Array.from({ length: 101 }, () => ({ role: 'user', content: 'x' })), target: 'y' })).toBe("line 7: 'input' must have 1 to 100 chat turns");
    expect(problem({ id: 'q', input: [{ role: 'robot', content: 'x' }], target: 'y' })).toBe("line 7: 'input[0].role' must be one of system, user, assistant");
    expect(problem({ id: 'q', input: [{ role: 'user', content: '' }], target: 'y' })).toBe("line 7: 'input[0].content' must be a non-empty string");
    expect(problem({ id: 'q', input: [{ role: 'user', content: 'x', name: 'bob' }], target: 'y' })).toMatch(/'input\[0\]' has an unknown field 'name'/);
    expect(problem({ id: 'q', input: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y' }], target: 'y' })).toMatch(/must end with a user turn/);
    const half = 'x'.repeat(MAX_INPUT_BYTES / 2 + 1);
    expect(problem({ id: 'q', input: [{ role: 'system', content: half }, { role: 'user', content: half }], target: 'y' })).toMatch(/'input' has more than 65536 bytes/);
    expect(problem({ id: 'q', input: 42, target: 'y' })).toMatch(/'input' must be a string or a list of chat turns/);
  });

  it('refuses text that cannot be stored', () => {
    expect(problem({ id: 'q', input: 'a\u0000b', target: 'y' })).toMatch(/'input' contains a NUL character/);
    expect(problem({ id: 'q', input: 'x', target: ['ok', '\ud800'] })).toMatch(/'target\[1\]' contains a NUL character or a lone UTF-16 surrogate/);
    expect(problem({ id: 'q', input: 'x', target: 'y', metadata: { a: [{ b: '\u0000' }] } })).toBe(
      "line 7: 'metadata.a[0].b' contains a NUL character or a lone UTF-16 surrogate, which cannot be stored",
    );
    // A surrogate pair (an emoji) is fine.
    expect(parseCase({ id: 'q', input: 'x 😀', target: '😀' }, 'x').target).toBe('😀');
  });

  it('takes 1 to 50 non-empty targets', () => {
    expect(problem({ id: 'q', input: 'x', target: [] })).toBe("line 7: 'target' must list 1 to 50 acceptable answers");
    expect(problem({ id: 'q', input: 'x', target: Array.from({ length: 51 }, (_, i) => `a${i}`) })).toBe("line 7: 'target' must list 1 to 50 acceptable answers");
    expect(problem({ id: 'q', input: 'x', target: ['a', ''] })).toBe("line 7: 'target[1]' must be a non-empty string");
    expect(problem({ id: 'q', input: 'x', target: ['a', 3] })).toBe("line 7: 'target[1]' must be a non-empty string");
  });

  it('allows an empty target only on a case checked by its files', () => {
    expect(problem({ id: 'q', input: 'x', target: '' })).toMatch(/^line 7: 'target' is empty \(an empty target is allowed only on a case checked by its files/);
    expect(parseCase({ id: 'q', input: 'Parse a.csv', target: '', files: { 'a.csv': 'x,y\n1,2\n' } }, 'x').target).toBe('');
    expect(parseCase({ id: 'q', input: 'Write out.md', target: '', metadata: { checks: [{ path: 'out.md' }] } }, 'x').target).toBe('');
    expect(problem({ id: 'q', input: 'x', target: '  ', files: { 'a.csv': 'x' } })).toMatch(/'target' is empty/);
  });

  it('checks metadata.checks as file checks', () => {
    expect(problem({ id: 'q', input: 'x', target: '', metadata: { checks: [{ path: '../etc/passwd' }] } })).toBe("line 7: 'metadata.checks[0].path' contains '..'");
    expect(problem({ id: 'q', input: 'x', target: 'y', metadata: { checks: [] } })).toBe("line 7: 'metadata.checks' must be a list of 1 to 200 file checks");
    expect(problem({ id: 'q', input: 'x', target: 'y', metadata: { checks: [{ path: 'a', size: 3 }] } })).toMatch(/'metadata.checks\[0\]' has an unknown field 'size'/);
  });

  it('keeps metadata as JSON only, and bounded', () => {
    expect(problem({ id: 'q', input: 'x', target: 'y', metadata: [1] })).toBe("line 7: 'metadata' must be a JSON object");
    expect(problem({ id: 'q', input: 'x', target: 'y', metadata: { when: new Date(0) } })).toBe("line 7: 'metadata.when' is not JSON (object)");
    expect(problem({ id: 'q', input: 'x', target: 'y', metadata: { n: Infinity } })).toBe("line 7: 'metadata.n' is not a finite number");
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(problem({ id: 'q', input: 'x', target: 'y', metadata: cyclic })).toMatch(/is nested deeper than 32 levels/);
    expect(problem({ id: 'q', input: 'x', target: 'y', metadata: { big: 'x'.repeat(70_000) } })).toBe("line 7: 'metadata' is more than 65536 bytes as JSON");
    // Empty metadata says nothing, so it is dropped (and does not change the dataset id).
    expect(parseCase({ id: 'q', input: 'x', target: 'y', metadata: {} }, 'x')).toEqual({ id: 'q', input: 'x', target: 'y' });
  });

  it('takes files as relative POSIX paths to bounded text', () => {
    const withFiles = (files: unknown): unknown => ({ id: 'q', input: 'x', target: 'y', files });
    expect(parseCase(withFiles({ 'data/sales.csv': 'a,b\n', 'notes/a.md': '# A' }), 'x').files).toEqual({ 'data/sales.csv': 'a,b\n', 'notes/a.md': '# A' });
    expect(problem(withFiles({ '/etc/passwd': 'x' }))).toBe("line 7: 'files' path '/etc/passwd' is absolute (it must be relative to the workspace)");
    expect(problem(withFiles({ 'a/../../b': 'x' }))).toBe("line 7: 'files' path 'a/../../b' contains '..'");
    expect(problem(withFiles({ 'a\\b': 'x' }))).toBe("line 7: 'files' path 'a\\b' contains a backslash (use / between folders)");
    expect(problem(withFiles({ 'C:/x': 'x' }))).toMatch(/starts with a drive letter/);
    expect(problem(withFiles({ 'a//b': 'x' }))).toMatch(/contains an empty segment/);
    expect(problem(withFiles({ 'a.md': 3 }))).toBe("line 7: 'files' entry 'a.md' must be text (a string)");
    expect(problem(withFiles({ 'a.md': 'x'.repeat(MAX_FILE_BYTES + 1) }))).toBe(`line 7: 'files' entry 'a.md' is more than ${MAX_FILE_BYTES} bytes`);
    expect(problem(withFiles({}))).toBe("line 7: 'files' must hold 1 to 200 files");
    expect(problem(withFiles(Object.fromEntries(Array.from({ length: 201 }, (_, i) => [`f${i}.txt`, 'x']))))).toBe("line 7: 'files' must hold 1 to 200 files");
    expect(problem(withFiles({ data: 'x', 'data/a.csv': 'y' }))).toBe("line 7: 'files' has both 'data' and 'data/a.csv' inside it");
    expect(problem(withFiles(['a.md']))).toBe("line 7: 'files' must be an object of workspace path -> text");
  });
});

describe('parseDatasetText and parseDatasetLines', () => {
  const q = (id: string, extra = ''): string => `{"id":"${id}","input":"question ${id}","target":"answer"${extra}}`;

  it('reads one case per line, skipping blank lines, CRLF and a BOM', async () => {
    const text = `\ufeff${q('a')}\r\n\n   \n${q('b')}\n`;
    expect(parseDatasetText(text).map((c) => c.id)).toEqual(['a', 'b']);
    expect((await parseDatasetLines(linesOf(q('a'), '', q('b')))).map((c) => c.id)).toEqual(['a', 'b']);
  });

  it('numbers lines from 1, blank ones included', async () => {
    const text = [q('a'), '', q('b'), '{"id":"c","input":"x","target":7}'].join('\n');
    expect(() => parseDatasetText(text)).toThrow("line 4: 'target' must be a string or a list of strings");
    const err = await parseDatasetLines(linesOf(q('a'), '', q('b'), '{"id":"c","input":"x","target":7}')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DatasetError);
    expect(err).toMatchObject({ line: 4, message: "line 4: 'target' must be a string or a list of strings" });
  });

  it('says which line is not JSON', () => {
    expect(() => parseDatasetText(`${q('a')}\n{"id": "b",`)).toThrow(/^line 2: not valid JSON \(/);
  });

  it('names both lines of a duplicate id', () => {
    let err: unknown;
    try {
      parseDatasetText([q('a'), q('b'), '', q('a')].join('\n'));
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ line: 4, message: "line 4: duplicate id 'a' (first on line 1)" });
  });

  it('refuses an empty dataset and one over the case limit', async () => {
    expect(() => parseDatasetText('\n\n  \n')).toThrow('the dataset has no cases (every line is blank)');
    await expect(parseDatasetLines(linesOf())).rejects.toThrow(DatasetError);
    expect(() => parseDatasetText([q('a'), q('b'), q('c')].join('\n'), { maxCases: 2 })).toThrow('line 3: the dataset has more than 2 cases');
    expect(parseDatasetText([q('a'), q('b')].join('\n'), { maxCases: 2 })).toHaveLength(2);
  });

  it('splits a source that yields several lines at once, keeping the line numbers', async () => {
    const err = await parseDatasetLines(linesOf(`${q('a')}\n${q('b')}`, q('b'))).catch((e: unknown) => e);
    expect(err).toMatchObject({ line: 3, message: "line 3: duplicate id 'b' (first on line 2)" });
  });
});

describe('canonicalJsonl and datasetId', () => {
  const cases: EvalCase[] = [
    { id: 'a', input: 'x', target: ['1', '2'], metadata: { z: 1, a: { y: [{ d: 1, c: 2 }], b: null } } },
    { id: 'b', input: [{ role: 'user', content: 'hi' }], target: 'hello' },
  ];

  it('writes each case with keys sorted at every depth, one per line', () => {
    expect(canonicalJsonl(cases)).toBe(
      '{"id":"a","input":"x","metadata":{"a":{"b":null,"y":[{"c":2,"d":1}]},"z":1},"target":["1","2"]}\n' +
        '{"id":"b","input":[{"content":"hi","role":"user"}],"target":"hello"}\n',
    );
  });

  it('is the sha256 of the canonical text, the same however the cases were spelled', () => {
    const id = datasetId(cases);
    expect(id).toBe(createHash('sha256').update(canonicalJsonl(cases)).digest('hex'));
    expect(id).toMatch(/^[0-9a-f]{64}$/);
    const uploaded = parseDatasetText(
      '{ "target": ["1","2"], "metadata": {"a": {"y": [{"c": 2, "d": 1}], "b": null}, "z": 1}, "input": "x", "id": "a" }\n' +
        '{"target":"hello","id":"b","input":[{"content":"hi","role":"user"}]}\n',
    );
    expect(datasetId(uploaded)).toBe(id);
    expect(datasetId(cases.map((c, i) => (i === 0 ? { ...c, target: ['1', '3'] } : c)))).not.toBe(id);
    expect(datasetId([...cases].reverse())).not.toBe(id);
  });

  it('keeps a key named __proto__ as an ordinary key', () => {
    const [parsed] = parseDatasetText('{"id":"a","input":"x","target":"y","metadata":{"__proto__":{"b":1}}}');
    expect(canonicalJsonl([parsed])).toBe('{"id":"a","input":"x","metadata":{"__proto__":{"b":1}},"target":"y"}\n');
  });
});

describe('caseText', () => {
  it('is the input itself, or the turns as role: content lines', () => {
    expect(caseText('What is 2+2?')).toBe('What is 2+2?');
    expect(
      caseText([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'What is 2+2?' },
      ]),
    ).toBe('system: Be brief.\nuser: What is 2+2?');
  });
});
