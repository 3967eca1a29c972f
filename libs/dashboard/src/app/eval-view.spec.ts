import type { DatasetList, RunSummary } from '@agentrun/contracts';
import {
  changeCounts,
  comparableEvals,
  datasetChoices,
  datasetNameFor,
  DATASET_NAME_PATTERN,
  differenceText,
  durationText,
  evalStartBody,
  isFiltered,
  NO_FILTERS,
  refreshLimit,
  resultsPath,
  scorersSeen,
  scoreText,
  signedText,
  solverChoices,
  splitList,
  tokensText,
  type CaseResultRow,
  type EvalForm,
} from './eval-view';

const row = (case_id: string, scorers: string[] = []): CaseResultRow => ({
  case_id,
  status: 'ok',
  score: 1,
  error_type: null,
  attempts: 1,
  usage: { prompt_tokens: 12, completion_tokens: 3 },
  duration_ms: 40,
  finished_at: '2026-01-01T00:00:00.000Z',
  result: scorers.length ? { input: 'i', target: ['t'], output: 'o', scores: scorers.map((scorer) => ({ scorer, value: 1, explanation: '' })), duration_ms: 40 } : null,
});

const evalRun = (run_id: string, dataset_id?: string, kind: 'eval' | 'agent' = 'eval'): RunSummary => ({
  run_id,
  kind,
  status: 'awaiting_review',
  model: 'm',
  parent_run_id: null,
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
  last_seq: 3,
  state: { status: 'awaiting_review', ...(dataset_id ? { dataset_id } : {}) },
});

const HASH_A = 'a'.repeat(64);
const HASH_B = 'b'.repeat(64);

describe('the eval page model', () => {
  it('asks for results with only the filters set, and the export with the same filters', () => {
    expect(resultsPath('ev-1', NO_FILTERS, { limit: 50 })).toBe('/runs/ev-1/results?limit=50');
    expect(resultsPath('ev 1', { status: 'failed', scorer: 'exact', error_type: 'agent_error' }, { after: 'case-7', limit: 50 })).toBe(
      '/runs/ev%201/results?status=failed&scorer=exact&error_type=agent_error&after=case-7&limit=50',
    );
    expect(resultsPath('ev-1', { ...NO_FILTERS, scorer: 'includes' }, { format: 'jsonl' })).toBe('/runs/ev-1/results?scorer=includes&format=jsonl');
    expect(resultsPath('ev-1', NO_FILTERS)).toBe('/runs/ev-1/results');
    expect(isFiltered(NO_FILTERS)).toBe(false);
    expect(isFiltered({ ...NO_FILTERS, error_type: 'infra_error' })).toBe(true);
  });

  it('keeps every scorer it has seen, so filtering by one never empties the choice', () => {
    const first = scorersSeen([], [row('a', ['includes', 'exact']), row('b', ['exact']), row('synthetic')]);
    expect(first).toEqual(['exact', 'includes']);
    // A filtered page shows fewer rows (and synthetic ones have no scores): the choices stay.
    expect(scorersSeen(first, [row('synthetic-2')])).toEqual(['exact', 'includes']);
    expect(scorersSeen(first, [row('c', ['model_graded'])])).toEqual(['exact', 'includes', 'model_graded']);
  });

  it('shows scores, signed differences, tokens and durations in one way everywhere', () => {
    expect(scoreText(0.66666)).toBe('0.6667');
    expect(scoreText(null)).toBe('—');
    expect(signedText(0.5)).toBe('+0.5000');
    expect(signedText(-0.25)).toBe('\u22120.2500');
    // Float noise is no difference, and never a negative zero.
    expect(signedText(0.3 - 0.1 - 0.2)).toBe('0.0000');
    expect(signedText(-0.00001)).toBe('0.0000');
    expect(tokensText({ prompt_tokens: 12, completion_tokens: 3 })).toBe('12 in · 3 out');
    expect(tokensText(null)).toBe('—');
    expect(durationText(850)).toBe('850 ms');
    expect(durationText(1250)).toBe('1.25 s');
    expect(durationText(null)).toBe('—');
  });

  it('a refresh asks for as many rows as are shown, within what the route allows', () => {
    expect(refreshLimit(0, 50)).toBe(50);
    expect(refreshLimit(120, 50)).toBe(120);
    expect(refreshLimit(900, 50)).toBe(500);
  });

  it('offers as baselines only other evals over the same dataset', () => {
    const runs = [evalRun('here', HASH_A), evalRun('same-1', HASH_A), evalRun('other', HASH_B), evalRun('synthetic'), evalRun('agent', HASH_A, 'agent'), evalRun('same-2', HASH_A)];
    expect(comparableEvals(runs, 'here', HASH_A).map((r) => r.run_id)).toEqual(['same-1', 'same-2']);
    // A synthetic eval has no dataset: nothing compares with it.
    expect(comparableEvals(runs, 'synthetic', undefined)).toEqual([]);
  });

  it('counts every kind of change, and words the mean difference with its interval', () => {
    expect(changeCounts({ counts: { improved: 1, unchanged: 2 } })).toEqual([
      { change: 'improved', count: 1 },
      { change: 'regressed', count: 0 },
      { change: 'unchanged', count: 2 },
      { change: 'added', count: 0 },
      { change: 'removed', count: 0 },
    ]);
    expect(differenceText({ mean_difference: 0.5, ci95: [0, 1], paired: 2 })).toBe('+0.5000 (95% interval 0.0000 to +1.0000), over 2 cases graded in both');
    expect(differenceText({ mean_difference: -0.25, ci95: null, paired: 1 })).toBe('\u22120.2500 (too few cases for an interval), over 1 case graded in both');
    expect(differenceText({ mean_difference: null, ci95: null, paired: 0 })).toMatch(/no case was graded in both runs/);
  });

  const list: DatasetList = {
    suites: [
      { name: 'qa', description: 'questions', solver: 'generate', scorers: ['exact'], cases: 30 },
      { name: 'agent', description: 'goals', solver: 'agent', scorers: [{ name: 'files', checks: [] }, 'model_graded'], cases: 8 },
    ],
    datasets: [{ id: HASH_A, name: 'mine', origin: 'upload', case_count: 1, bytes: 40, created_at: '2026-01-01T00:00:00.000Z' }],
  };

  it('lists suites by name and uploads by content hash, each with the solver and scorers it defaults to', () => {
    const choices = datasetChoices(list);
    expect(choices.map((c) => [c.value, c.dataset, c.solver, c.scorers])).toEqual([
      ['suite:qa', { name: 'qa' }, 'generate', ['exact']],
      ['suite:agent', { name: 'agent' }, 'agent', ['files', 'model_graded']],
      [`id:${HASH_A}`, { id: HASH_A }, 'generate', ['exact']],
    ]);
    expect(choices[2].label).toBe('mine (uploaded, 1 case, aaaaaaaaaaaa)');
    expect(solverChoices(list)).toEqual(['generate', 'agent']);
    expect(solverChoices(undefined)).toEqual(['generate']);
  });

  const form = (patch: Partial<EvalForm>): EvalForm => ({
    runId: '',
    model: ' scripted ',
    reviewers: 'alice, , bob',
    source: 'synthetic',
    suite: 'smoke',
    cases: '12',
    failFraction: '0.25',
    dataset: undefined,
    solver: '',
    scorers: '',
    caseLimit: '',
    modelEndpoint: '',
    ...patch,
  });

  it('starts a synthetic eval as before, and a dataset eval with only the fields filled in', () => {
    expect(evalStartBody(form({ runId: ' ev-1 ' }))).toEqual({ run_id: 'ev-1', model: 'scripted', reviewers: ['alice', 'bob'], suite: 'smoke', cases: 12, fail_fraction: 0.25 });
    const [qa, , mine] = datasetChoices(list);
    expect(evalStartBody(form({ source: 'dataset', dataset: qa }))).toEqual({ model: 'scripted', reviewers: ['alice', 'bob'], dataset: { name: 'qa' } });
    expect(
      evalStartBody(form({ source: 'dataset', dataset: mine, solver: 'generate', scorers: 'exact, includes', caseLimit: '5', modelEndpoint: 'local', reviewers: '' })),
    ).toEqual({ model: 'scripted', reviewers: [], dataset: { id: HASH_A }, solver: 'generate', scorers: ['exact', 'includes'], cases: 5, model_endpoint: 'local' });
    expect(() => evalStartBody(form({ source: 'dataset' }))).toThrow('choose a dataset to evaluate');
    expect(splitList(' a ,b,, c ')).toEqual(['a', 'b', 'c']);
  });

  it('suggests a dataset name from the file name that the gateway accepts', () => {
    const accepted = new RegExp(`^${DATASET_NAME_PATTERN}$`);
    for (const [file, name] of [
      ['capitals.jsonl', 'capitals'],
      ['my cases (v2).ndjson', 'my-cases-v2'],
      ['.hidden.jsonl', 'hidden'],
      ['qa.v3.JSONL', 'qa.v3'],
    ]) {
      expect(datasetNameFor(file)).toBe(name);
      expect(datasetNameFor(file)).toMatch(accepted);
    }
  });
});
