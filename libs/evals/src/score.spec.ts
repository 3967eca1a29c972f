import type { ChatTurn } from './dataset';
import { normaliseScorers } from './registry';
import { caseScore, DEFAULT_RUBRIC, gradingPrompt, readGrade, scoreCase, UnreadableJudgeError, UnreadableOutputError, type Judge, type WorkspaceReader } from './score';
import { ScorerOptionError } from './scorers';

const workspaceOf = (files: Record<string, string>): WorkspaceReader & { reads: string[] } => {
  const reads: string[] = [];
  return {
    reads,
    read: async (path) => {
      reads.push(path);
      return files[path];
    },
  };
};

/** A judge that records what it was sent and answers `reply`. */
const judgeAnswering = (reply: string): Judge & { calls: { messages: ChatTurn[]; options: unknown }[] } => {
  const calls: { messages: ChatTurn[]; options: unknown }[] = [];
  const judge = async (messages: ChatTurn[], options: unknown): Promise<string> => {
    calls.push({ messages, options });
    return reply;
  };
  return Object.assign(judge, { calls });
};

describe('scoreCase', () => {
  it('runs every scorer in order over the output', async () => {
    const specs = normaliseScorers(['exact', 'includes', { name: 'regex', pattern: 'paris' }, 'numeric', 'choice', 'json']);
    const scores = await scoreCase(specs, { input: 'Capital of France?', target: ['Paris', '75'], output: 'Paris' });
    expect(scores.map((s) => [s.scorer, s.value])).toEqual([
      ['exact', 1],
      ['includes', 1],
      ['regex', 1],
      ['numeric', 0],
      ['choice', 0],
      ['json', 0],
    ]);
    expect(scores[3].explanation).toBe('the output has no number');
  });

  it('passes the options: regex flags, numeric tolerance', async () => {
    const caseSensitive = normaliseScorers([{ name: 'regex', pattern: 'paris', flags: '' }]);
    expect((await scoreCase(caseSensitive, { input: 'q', target: 'x', output: 'Paris' }))[0].value).toBe(0);
    const near = normaliseScorers([{ name: 'numeric', tolerance: 0.01 }]);
    expect((await scoreCase(near, { input: 'q', target: '3.14159', output: 'about 3.14' }))[0].value).toBe(1);
  });

  it('checks JSON output against the schema in the options', async () => {
    const specs = normaliseScorers([{ name: 'json', schema: { type: 'object', required: ['total'], properties: { total: { type: 'number' } } } }]);
    const subject = (output: string) => ({ input: 'Sum as JSON', target: '{}', output });
    expect(await scoreCase(specs, subject('```json\n{"total": 12}\n```'))).toEqual([{ scorer: 'json', value: 1, explanation: 'valid JSON that matches the schema' }]);
    expect(await scoreCase(specs, subject('{"total": "12"}'))).toEqual([{ scorer: 'json', value: 0, explanation: 'JSON that fails the schema: total must be number' }]);
    expect((await scoreCase(specs, subject('twelve')))[0]).toMatchObject({ value: 0, explanation: expect.stringMatching(/^not JSON/) });
  });

  it('throws UnreadableOutputError for an empty or absent output, unless only files are checked', async () => {
    const specs = normaliseScorers(['exact']);
    await expect(scoreCase(specs, { input: 'q', target: 'a', output: '  \n' })).rejects.toThrow(new UnreadableOutputError('the output is empty: no scorer can read it'));
    await expect(scoreCase(specs, { input: 'q', target: 'a', output: undefined })).rejects.toThrow(UnreadableOutputError);
    await expect(scoreCase(specs, { input: 'q', target: 'a', output: null })).rejects.toThrow('the output is absent: no scorer can read it');
    const files = normaliseScorers([{ name: 'files', checks: [{ path: 'out.md' }] }]);
    expect(await scoreCase(files, { input: 'q', target: '', output: '', workspace: workspaceOf({ 'out.md': 'x' }) })).toEqual([{ scorer: 'files', value: 1, explanation: 'all 1 file checks passed' }]);
  });

  it('refuses to compare an output with an empty target', async () => {
    for (const name of ['exact', 'includes', 'numeric', 'choice', 'model_graded']) {
      const specs = normaliseScorers([name]);
      await expect(scoreCase(specs, { input: 'q', target: '', output: 'anything' }, judgeAnswering('GRADE: C'))).rejects.toThrow(
        new ScorerOptionError(`${name}: the case's target is empty, so only the 'files' scorer can score it`),
      );
    }
  });
});

describe('the files scorer', () => {
  const agentCase = {
    input: 'Parse the file data/sales.csv.',
    target: '',
    output: 'done',
    metadata: {
      checks: [
        { path: 'parsed/data/sales.csv.json', exists: true },
        { path: 'parsed/data/sales.csv.json', contains: 'csv' },
        { path: 'parsed/data/sales.csv.json', matches: '"rows":\\s*3' },
        { path: 'scratch.txt', exists: false },
      ],
    },
  };

  it('scores the fraction of the case metadata checks the workspace passes', async () => {
    const all = workspaceOf({ 'parsed/data/sales.csv.json': '{"format":"csv","rows": 3}' });
    expect(await scoreCase(normaliseScorers(['files']), { ...agentCase, workspace: all })).toEqual([{ scorer: 'files', value: 1, explanation: 'all 4 file checks passed' }]);
    // Each file is read once however many checks name it.
    expect(all.reads).toEqual(['parsed/data/sales.csv.json', 'scratch.txt']);

    const some = workspaceOf({ 'parsed/data/sales.csv.json': '{"format":"tsv","rows": 3}', 'scratch.txt': '' });
    expect(await scoreCase(normaliseScorers(['files']), { ...agentCase, workspace: some })).toEqual([
      { scorer: 'files', value: 0.5, explanation: "2 of 4 file checks passed: parsed/data/sales.csv.json does not contain 'csv'; scratch.txt exists and must not" },
    ]);

    const none = workspaceOf({});
    const [score] = await scoreCase(normaliseScorers(['files']), { ...agentCase, workspace: none });
    expect(score.value).toBe(0.25);
    expect(score.explanation).toBe(
      '1 of 4 file checks passed: parsed/data/sales.csv.json is missing; parsed/data/sales.csv.json is missing; parsed/data/sales.csv.json is missing',
    );
  });

  it('prefers the checks in its options to the case metadata', async () => {
    const specs = normaliseScorers([{ name: 'files', checks: [{ path: 'report.md', matches: '^# Report' }] }]);
    const [score] = await scoreCase(specs, { ...agentCase, workspace: workspaceOf({ 'report.md': 'Report' }) });
    expect(score).toEqual({ scorer: 'files', value: 0, explanation: '0 of 1 file checks passed: report.md does not match /^# Report/' });
  });

  it('needs checks and a workspace', async () => {
    await expect(scoreCase(normaliseScorers(['files']), { input: 'q', target: '', output: 'x', workspace: workspaceOf({}) })).rejects.toThrow(
      new ScorerOptionError("files: no file checks: give the scorer 'checks' or the case 'metadata.checks'"),
    );
    await expect(scoreCase(normaliseScorers(['files']), agentCase)).rejects.toThrow(new ScorerOptionError('files: there is no workspace to check (the solver leaves none)'));
    await expect(scoreCase(normaliseScorers(['files']), { ...agentCase, metadata: { checks: [{ path: '../x' }] }, workspace: workspaceOf({}) })).rejects.toThrow(
      new ScorerOptionError("files: 'metadata.checks[0].path' contains '..'"),
    );
  });
});

describe('the model_graded scorer', () => {
  it('sends the judge one user message in the exact grading form', async () => {
    const judge = judgeAnswering('It says Paris.\nGRADE: C');
    const specs = normaliseScorers([{ name: 'model_graded', model: 'judge-1' }]);
    const input: ChatTurn[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Capital of France?' },
    ];
    const scores = await scoreCase(specs, { input, target: ['Paris', 'Paris, France'], output: 'It is Paris.' }, judge);
    expect(scores).toEqual([{ scorer: 'model_graded', value: 1, explanation: 'It says Paris.\nGRADE: C' }]);
    expect(judge.calls).toEqual([
      {
        messages: [
          {
            role: 'user',
            content:
              '[grading]\n<question>\nsystem: Be brief.\nuser: Capital of France?\n</question>\n<target>\nParis\nParis, France\n</target>\n' +
              '<submission>\nIt is Paris.\n</submission>\n<rubric>\nThe submission is correct if it states the target answer; extra words are fine.\n</rubric>\n' +
              'Explain briefly, then end with one line: GRADE: C (correct), GRADE: P (partly correct) or GRADE: I (incorrect).',
          },
        ],
        options: { model: 'judge-1' },
      },
    ]);
  });

  it('puts the rubric from the options in the message', () => {
    expect(gradingPrompt('Q', 'A', 'S', 'Only the number counts.')).toBe(
      '[grading]\n<question>\nQ\n</question>\n<target>\nA\n</target>\n<submission>\nS\n</submission>\n<rubric>\nOnly the number counts.\n</rubric>\n' +
        'Explain briefly, then end with one line: GRADE: C (correct), GRADE: P (partly correct) or GRADE: I (incorrect).',
    );
    expect(gradingPrompt('Q', 'A', 'S')).toContain(`<rubric>\n${DEFAULT_RUBRIC}\n</rubric>`);
  });

  it('reads the last grade in the reply', () => {
    expect(readGrade('GRADE: P')).toEqual({ value: 0.5, explanation: 'GRADE: P' });
    expect(readGrade('I could say GRADE: C, but it is wrong.\n**GRADE: I**').value).toBe(0);
    expect(readGrade('Partly.\nGRADE:P\n').value).toBe(0.5);
    expect(readGrade(`${'x'.repeat(3000)}\nGRADE: C`).explanation).toHaveLength(2000);
  });

  it('throws UnreadableJudgeError for a reply with no grade', async () => {
    expect(() => readGrade('The answer looks right to me.')).toThrow(UnreadableJudgeError);
    expect(() => readGrade('GRADE: Correct')).toThrow(UnreadableJudgeError);
    const judge = judgeAnswering('no idea');
    const err = await scoreCase(normaliseScorers(['model_graded']), { input: 'q', target: 'a', output: 'b' }, judge).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnreadableJudgeError);
    expect(err).toMatchObject({ reply: 'no idea' });
  });

  it('lets a failing judge fail the scoring unchanged', async () => {
    const failure = new Error('judge answered 503');
    const judge: Judge = async () => {
      throw failure;
    };
    await expect(scoreCase(normaliseScorers(['exact', 'model_graded']), { input: 'q', target: 'a', output: 'a' }, judge)).rejects.toBe(failure);
  });

  it('needs a judge', async () => {
    await expect(scoreCase(normaliseScorers(['model_graded']), { input: 'q', target: 'a', output: 'a' })).rejects.toThrow(ScorerOptionError);
  });
});

describe('caseScore', () => {
  it('is the mean of the values to 3 decimals', () => {
    expect(caseScore([{ scorer: 'exact', value: 1, explanation: '' }])).toBe(1);
    expect(
      caseScore([
        { scorer: 'exact', value: 1, explanation: '' },
        { scorer: 'files', value: 2 / 3, explanation: '' },
        { scorer: 'model_graded', value: 0, explanation: '' },
      ]),
    ).toBe(0.556);
    expect(() => caseScore([])).toThrow(RangeError);
  });

  it('is the same whatever order the scorers come in (found by a property test: 0.338 one way, 0.337 the other)', () => {
    const scores = [0, 0, 0.3, 0.4, 0, 0.5, 1, 0.5].map((value) => ({ scorer: 'files', value, explanation: '' }));
    expect(caseScore([...scores].reverse())).toBe(caseScore(scores));
  });
});
