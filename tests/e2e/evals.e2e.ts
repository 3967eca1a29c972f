import type { CaseResultRow } from '@agentrun/contracts';
import { datasetId, loadSuite } from '@agentrun/evals';
import { answeredRight } from '../../apps/model-server/src/eval-rules';
import { Platform, uniqueId } from '../support/platform';

/**
 * Real evaluations end to end: datasets (shipped, inline, uploaded) solved by real model calls through the
 * local model server, scored, kept per case in the read model, exported and compared.
 */
describe('Real evaluations', () => {
  // Transient model errors are retried quickly, so an infra_error case settles in seconds.
  const platform = new Platform({ AGENTRUN_ERRORED_TURN_UNGRADED: 'true', EVAL_CASE_HEARTBEAT_S: '5' });
  const org = 'acme';
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  // Every eval names a reviewer (there are no default ones).
  const startEval = (body: Record<string, unknown>) => platform.http('POST', '/evals', { org, body: { reviewers: ['alice'], ...body } });
  const stateOf = async (runId: string) => (await platform.http('GET', `/runs/${runId}`, { org })).body.state;
  const allResults = async (runId: string, query = ''): Promise<CaseResultRow[]> => {
    const rows: CaseResultRow[] = [];
    let after: string | null = null;
    do {
      const page = await platform.http('GET', `/runs/${runId}/results?limit=7${query}${after ? `&after=${after}` : ''}`, { org });
      expect(page.status).toBe(200);
      rows.push(...(page.body.cases as CaseResultRow[]));
      after = page.body.next_after;
    } while (after);
    return rows;
  };
  const evalOver = async (body: Record<string, unknown>): Promise<string> => {
    const runId = uniqueId('eval');
    const started = await startEval({ run_id: runId, model: 'scripted', ...body });
    expect(started).toMatchObject({ status: 202 });
    await platform.waitForStatus(org, runId, 'awaiting_review');
    return runId;
  };

  it('scores the shipped QA suite against the local model server with exactly the documented score', async () => {
    const suite = loadSuite('qa');
    const right = new Set(answeredRight('qa'));
    const runId = await evalOver({ dataset: { name: 'qa' }, reviewers: ['alice'] });
    const state = await stateOf(runId);
    expect(state).toMatchObject({ total: suite.cases.length, done: suite.cases.length, solver: 'generate', dataset_id: datasetId(suite.cases) });
    expect(state.counts).toEqual({ ok: suite.cases.length, failed: 0, ungraded: 0 });
    expect(state.score).toBe(Math.round((right.size / suite.cases.length) * 1000) / 1000);

    const rows = await allResults(runId);
    expect(rows.map((r) => r.case_id)).toEqual(suite.cases.map((c) => c.id).sort());
    for (const row of rows) {
      expect(row.score).toBe(right.has(row.case_id) ? 1 : 0);
      expect(row.result?.scores).toEqual([expect.objectContaining({ scorer: 'exact', value: row.score })]);
      expect(row.result?.output).toEqual(expect.any(String));
      expect(row.usage?.prompt_tokens).toBeGreaterThan(0);
      expect(row.usage?.completion_tokens).toBeGreaterThan(0);
    }
    // Filters, and the export streams every case as one JSON object per line.
    const wrong = await allResults(runId, '&scorer=exact');
    expect(wrong.map((r) => r.case_id).sort()).toEqual(suite.cases.map((c) => c.id).filter((id) => !right.has(id)).sort());
    const res = await fetch(`${platform.gatewayUrl}/runs/${runId}/results?format=jsonl`, { headers: { 'X-Org': org } });
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    const lines = (await res.text()).trim().split('\n').map((l) => JSON.parse(l) as CaseResultRow);
    expect(lines.map((l) => l.case_id)).toEqual(rows.map((r) => r.case_id));
    // Another org sees no such run.
    expect((await platform.http('GET', `/runs/${runId}/results`, { org: 'other-org' })).status).toBe(404);
  });

  it('takes inline cases, several scorers and a judge model, and classifies model errors from what happened', async () => {
    const cases = [
      { id: 'exact-hit', input: 'Say the number. [answer: 42]', target: '42' },
      { id: 'wordy', input: 'Say it in words. [answer: the answer is 42]', target: ['42', 'forty-two'] },
      { id: 'server-down', input: 'Fail please [scenario:always_500]', target: 'x' },
      { id: 'refused', input: 'A bad request [scenario:400]', target: 'x' },
      { id: 'bad-key', input: 'Who am I [scenario:401]', target: 'x' },
      { id: 'spent-key', input: 'Out of money [scenario:quota]', target: 'x' },
    ];
    const runId = await evalOver({ dataset: { cases, name: 'inline-smoke' }, solver: { name: 'generate', temperature: 0, max_tokens: 32 }, scorers: ['exact', 'includes', 'model_graded'] });
    const rows = Object.fromEntries((await allResults(runId)).map((r) => [r.case_id, r]));
    const values = (id: string) => Object.fromEntries(rows[id].result!.scores.map((s) => [s.scorer, s.value]));
    expect(values('exact-hit')).toEqual({ exact: 1, includes: 1, model_graded: 1 });
    expect(values('wordy')).toEqual({ exact: 0, includes: 1, model_graded: 1 });
    expect(rows['wordy'].score).toBeCloseTo(2 / 3, 3);
    expect(rows['wordy'].result!.scores.find((s) => s.scorer === 'model_graded')!.explanation).toMatch(/GRADE: C/);
    // 5xx on every attempt: infra_error, ungraded under the flag, after the retry policy's attempts.
    expect(rows['server-down']).toMatchObject({ status: 'ungraded', error_type: 'infra_error', score: null });
    expect(rows['server-down'].attempts).toBeGreaterThan(1);
    expect(rows['server-down'].result!.error).toMatch(/500/);
    // A request the model refuses is the eval's own mistake: scored 0, never retried.
    expect(rows['refused']).toMatchObject({ status: 'failed', error_type: 'agent_error', score: 0, attempts: 1 });
    // The key's own failures: not the agent's fault, so ungraded under the flag, and never retried.
    expect(rows['bad-key']).toMatchObject({ status: 'ungraded', error_type: 'model_key_auth', score: null, attempts: 1 });
    expect(rows['spent-key']).toMatchObject({ status: 'ungraded', error_type: 'model_key_budget', score: null, attempts: 1 });
    const state = await stateOf(runId);
    expect(state.counts).toEqual({ ok: 2, failed: 1, ungraded: 3 });
    expect(state.score).toBeCloseTo((1 + 2 / 3 + 0) / 3, 3);

    // retry-failed runs the failed and ungraded cases again over the same dataset, with the same scorers.
    const retry = await platform.http('POST', `/runs/${runId}/retry-failed`, { org });
    expect(retry.status).toBe(202);
    await platform.waitForStatus(org, `${runId}-retry-1`, 'awaiting_review');
    const retried = await allResults(`${runId}-retry-1`);
    expect(retried.map((r) => r.case_id).sort()).toEqual(['bad-key', 'refused', 'server-down', 'spent-key']);
    expect((await stateOf(`${runId}-retry-1`)).dataset_id).toBe(state.dataset_id);
  });

  it('uploads a dataset, lists it, evaluates it by name and by id, and compares two evals of it', async () => {
    const name = uniqueId('ds');
    const cases = [
      { id: 'a', input: '[answer: Paris]', target: 'Paris' },
      { id: 'b', input: '[answer: it is Rome]', target: 'Rome' },
      { id: 'c', input: '[answer: 7]', target: '8' },
    ];
    const upload = await fetch(`${platform.gatewayUrl}/datasets?name=${name}`, {
      method: 'POST',
      headers: { 'X-Org': org, 'Content-Type': 'application/x-ndjson' },
      body: cases.map((c) => JSON.stringify(c)).join('\n'),
    });
    expect(upload.status).toBe(201);
    const stored = (await upload.json()) as { id: string; case_count: number };
    expect(stored).toMatchObject({ id: datasetId(cases), case_count: 3 });
    const listed = await platform.http('GET', '/datasets', { org });
    expect(listed.body.datasets).toEqual(expect.arrayContaining([expect.objectContaining({ name, id: stored.id })]));
    expect(listed.body.suites.map((s: { name: string }) => s.name)).toEqual(expect.arrayContaining(['qa', 'mcq', 'agent']));
    expect((await platform.http('GET', '/datasets', { org: 'other-org' })).body.datasets).toEqual([]);

    const strict = await evalOver({ dataset: { name }, scorers: ['exact'] });
    const lenient = await evalOver({ dataset: { id: stored.id }, scorers: ['includes'] });
    const compared = await platform.http('GET', `/runs/${lenient}/compare?with=${strict}`, { org });
    expect(compared.status).toBe(200);
    expect(compared.body).toMatchObject({ dataset_id: stored.id, mean_current: 0.6667, mean_baseline: 0.3333, mean_difference: 0.3333 });
    expect(Object.fromEntries(compared.body.cases.map((c: { case_id: string; change: string }) => [c.case_id, c.change]))).toEqual({ a: 'unchanged', b: 'improved', c: 'unchanged' });
    expect(compared.body.ci95).toHaveLength(2);

    const otherDataset = await evalOver({ dataset: { cases: [{ id: 'z', input: '[answer: z]', target: 'z' }] } });
    const refused = await platform.http('GET', `/runs/${otherDataset}/compare?with=${strict}`, { org });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(/same dataset/);
  });

  it('runs the agent suite: each case an agent run in a workspace seeded from its files, scored by the files it leaves', async () => {
    const suite = loadSuite('agent');
    const right = new Set(answeredRight('agent'));
    const runId = await evalOver({ dataset: { name: 'agent' }, snapshots: { per_turn: true } });
    const state = await stateOf(runId);
    expect(state).toMatchObject({ solver: 'agent', total: suite.cases.length });
    expect(state.counts).toEqual({ ok: suite.cases.length, failed: 0, ungraded: 0 });
    expect(state.score).toBe(Math.round((right.size / suite.cases.length) * 1000) / 1000);
    const rows = await allResults(runId);
    for (const row of rows) {
      expect(row.score).toBe(right.has(row.case_id) ? 1 : 0);
      expect(row.result?.scores[0].scorer).toBe('files');
      expect(row.result?.output).toMatch(/^done: /);
    }
    // Each case is a run of its own, linked to the eval, with its snapshot series (per turn and the final one).
    const first = suite.cases[0];
    const child = await platform.http('GET', `/runs/${runId}.${first.id}`, { org });
    expect(child.body).toMatchObject({ kind: 'agent', status: 'done', parent_run_id: runId });
    const snapshots = (await platform.http('GET', `/runs/${runId}.${first.id}/snapshots`, { org })).body.items as { is_final: boolean; turn?: number }[];
    expect(snapshots.some((s) => s.is_final)).toBe(true);
    expect(snapshots.some((s) => s.turn !== undefined)).toBe(true);
  });

  it('cancels an agent-solver eval: its case runs are cancelled with it, and no case is counted that did not finish', async () => {
    const cases = ['one', 'two'].map((id) => ({ id, input: `Think slowly about ${id}. [scenario:slow] [delay:30000]`, target: '', files: { 'notes.md': `# ${id}\n` }, metadata: { checks: [{ path: 'notes.md' }] } }));
    const runId = uniqueId('eval-cancel');
    expect((await startEval({ run_id: runId, model: 'scripted', dataset: { cases }, solver: 'agent', scorers: ['files'] })).status).toBe(202);
    // Both cases' runs are under way (their model calls wait 30 s), then the eval is cancelled.
    for (const c of cases) await platform.waitForStatus(org, `${runId}.${c.id}`, 'running');
    expect((await platform.http('POST', `/runs/${runId}/cancel`, { org, body: {} })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'cancelled', 60_000);
    for (const c of cases) await platform.waitForStatus(org, `${runId}.${c.id}`, 'cancelled', 60_000);
    const state = await stateOf(runId);
    expect(state.done).toBe(0);
    expect(Object.values(state.cases).map((c) => (c as { status: string }).status)).toEqual(['pending', 'pending']);
    expect(await allResults(runId)).toEqual([]);
  });

  it('refuses bad datasets, solvers and scorers with a 4xx that says what is wrong', async () => {
    const refused = async (body: Record<string, unknown>, status: number) => {
      const res = await startEval({ model: 'scripted', ...body });
      expect(res.status).toBe(status);
      return String(res.body.detail);
    };
    // The request's shape (the documented schema): 400, listing what would do.
    expect(await refused({ dataset: { name: 'qa' }, scorers: ['exact', 'telepathy'] }, 400)).toBe('scorers.1 must be one of exact, includes, regex, numeric, choice, json, files, model_graded');
    expect(await refused({ dataset: { name: 'qa' }, solver: 'oracle' }, 400)).toBe('solver must be one of generate, agent, synthetic');
    expect(await refused({ dataset: { cases: [{ id: 'x', input: 'hi' }] } }, 400)).toBe("dataset.cases.0 must have required property 'target'");
    expect(await refused({ suite: 's', cases: 2, scorers: ['exact'] }, 400)).toMatch(/must have property dataset when property scorers is present/);
    // Well formed, but not something this org can evaluate: no such dataset (404), or cases, options or an endpoint that do not fit (422).
    expect(await refused({ dataset: { name: 'no-such-suite' } }, 404)).toMatch(/unknown dataset 'no-such-suite'/);
    expect(await refused({ dataset: { name: 'qa' }, model_endpoint: 'nowhere' }, 422)).toBe("unknown model endpoint 'nowhere': the workers have default");
    expect(await refused({ dataset: { name: 'qa' }, case_ids: ['not-a-case'] }, 422)).toBe("dataset 'qa' has no case 'not-a-case'");
    expect(await refused({ dataset: { name: 'qa' }, scorers: [{ name: 'regex', pattern: '(' }] }, 422)).toMatch(/regex.*not a regular expression/);
    expect(await refused({ dataset: { cases: [{ id: 'a', input: 'x', target: 'y' }, { id: 'a', input: 'z', target: 'y' }] } }, 422)).toMatch(/'a'/);

    const upload = await fetch(`${platform.gatewayUrl}/datasets?name=broken`, {
      method: 'POST',
      headers: { 'X-Org': org, 'Content-Type': 'application/x-ndjson' },
      body: '{"id":"a","input":"x","target":"y"}\n{"id":"b","input":"x"}\n',
    });
    expect(upload.status).toBe(400);
    expect(((await upload.json()) as { detail: string }).detail).toMatch(/line 2/);
  });
});
