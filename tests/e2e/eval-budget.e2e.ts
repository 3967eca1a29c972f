import type { RunEventEnvelope } from '@agentrun/contracts';
import { loadSuite } from '@agentrun/evals';
import { Platform, uniqueId } from '../support/platform';
import { waitFor } from '../support/wait';

/**
 * An eval's budget, per case: each `generate` case reserves its worst case (its prompt and
 * EVAL_MAX_TOKENS, priced) against the eval's `budget` before it runs. When one does not fit, the eval
 * is `paused` (`budget_exhausted`, naming the case) and no further case starts; `POST
 * /runs/{id}/raise-budget` (`eval.raise_budget`) lets them go on to `awaiting_review`. Each case's
 * usage is priced, added up in the eval's state, settled once in the ledger, and counted by `GET /usage`.
 */
describe("an eval's budget", () => {
  const price = { input_usd_per_million: 3, output_usd_per_million: 15 };
  const platform = new Platform({ AGENTRUN_MODEL_PRICES: JSON.stringify({ scripted: price }), EVAL_MAX_TOKENS: '64' });
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  it('pauses when a case does not fit, waits with its remaining cases, and a raise finishes it; nothing counts twice', async () => {
    const org = uniqueId('evbudget');
    const runId = uniqueId('eval');
    const total = loadSuite('qa').cases.length;
    const started = await platform.http('POST', '/evals', { org, body: { run_id: runId, model: 'scripted', dataset: { name: 'qa' }, reviewers: ['alice'], budget: { max_tokens: 300 } } });
    expect(started.status).toBe(202);
    await platform.waitForStatus(org, runId, 'paused');
    const eventsOf = async () => (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId])).map((r) => r.event);
    const exhausted = await waitFor('the budget_exhausted event', async () => (await eventsOf()).find((e) => e.type === 'budget_exhausted'), 30_000);
    expect(exhausted.payload).toMatchObject({ scope: 'run', limit: 'tokens', max: 300, case_id: expect.any(String) });
    expect((exhausted.payload.spent as number) + (exhausted.payload.reserved as number) + (exhausted.payload.needed as number)).toBeGreaterThan(300);
    // The cases after it wait: the eval stays paused with cases left, and starts no more.
    const paused = (await platform.http('GET', `/runs/${runId}`, { org })).body;
    expect(paused).toMatchObject({ status: 'paused', state: { status: 'paused', reason: 'budget_exhausted', budget: { max_tokens: 300 } } });
    expect(paused.state.done).toBeLessThan(total);

    // Not higher: the Update's validator refuses it. Higher: the eval goes on.
    const lower = await platform.http('POST', `/runs/${runId}/raise-budget`, { org, body: { max_tokens: 300 } });
    expect(lower.status).toBe(422);
    expect((await platform.http('POST', `/runs/${runId}/raise-budget`, { org, body: { max_tokens: 1_000_000 } })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'awaiting_review');
    const state = (await platform.http('GET', `/runs/${runId}`, { org })).body.state;
    expect(state).toMatchObject({ done: total, budget: { max_tokens: 1_000_000 } });
    expect((await eventsOf()).filter((e) => e.type === 'budget_raised').map((e) => e.payload.previous)).toEqual([{ max_tokens: 300 }]);

    // Every case priced, reserved once and settled to what it used; the eval's usage and the org's add them up.
    const cases = (await eventsOf()).filter((e) => e.type === 'case_finished').map((e) => (e.payload.result as { usage: { prompt_tokens: number; completion_tokens: number; cost_usd: number } }).usage);
    expect(cases).toHaveLength(total);
    for (const u of cases) expect(u.cost_usd).toBeCloseTo((u.prompt_tokens * price.input_usd_per_million + u.completion_tokens * price.output_usd_per_million) / 1e6, 8);
    const tokens = cases.reduce((n, u) => n + u.prompt_tokens + u.completion_tokens, 0);
    expect(state.usage).toMatchObject({ calls: total, prompt_tokens: cases.reduce((n, u) => n + u.prompt_tokens, 0), completion_tokens: cases.reduce((n, u) => n + u.completion_tokens, 0) });
    const reservations = await platform.query<{ key: string; settled: boolean; tokens: string }>('SELECT key, settled, tokens::text FROM budget_reservations WHERE org = $1 AND run_id = $2', [org, runId]);
    expect(reservations).toHaveLength(total);
    expect(reservations.every((r) => r.settled)).toBe(true);
    expect(reservations.reduce((n, r) => n + Number(r.tokens), 0)).toBe(tokens);
    const usage = await platform.http('GET', '/usage?group_by=run', { org });
    expect(usage.body.groups).toEqual([expect.objectContaining({ key: runId, calls: total })]);
    expect(usage.body.total.prompt_tokens + usage.body.total.completion_tokens).toBe(tokens);
  });
});

/**
 * An `agent`-solver eval's cases spend under the eval's budget: each case's run reserves its model
 * calls against the eval's limits, under the eval's run id. A case whose call does not fit pauses (its
 * run `paused`, `budget_exhausted`), and so does the eval, naming the case; the eval's raise reaches
 * every case's run, and they go on to `done`. A case's run cannot be raised on its own.
 */
describe("an agent-solver eval's budget", () => {
  const platform = new Platform({ EVAL_PARALLELISM: '2' });
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  it("pauses its cases' runs and itself when a call does not fit, and one raise lets them all finish", async () => {
    const org = uniqueId('evagent');
    const runId = uniqueId('eval');
    const cases = ['one', 'two'].map((id) => ({ id, input: `Write notes about ${id}.`, target: '', files: { 'notes.md': `# ${id}\n` }, metadata: { checks: [{ path: 'notes.md' }] } }));
    // No call fits 50 tokens (its worst case is its prompt and the model's max_tokens).
    const started = await platform.http('POST', '/evals', { org, body: { run_id: runId, model: 'scripted', dataset: { cases }, solver: 'agent', scorers: ['files'], reviewers: ['alice'], budget: { max_tokens: 50 } } });
    expect(started.status).toBe(202);
    await platform.waitForStatus(org, runId, 'paused');
    for (const c of cases) await platform.waitForStatus(org, `${runId}.${c.id}`, 'paused');
    const eventsOf = async (id: string) => (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, id])).map((r) => r.event);
    const exhausted = (await eventsOf(runId)).find((e) => e.type === 'budget_exhausted');
    expect(exhausted?.payload).toMatchObject({ scope: 'run', limit: 'tokens', max: 50, case_id: expect.stringMatching(/^(one|two)$/) });
    const child = (await platform.http('GET', `/runs/${runId}.one`, { org })).body;
    expect(child.state).toMatchObject({ status: 'paused', reason: 'budget_exhausted', budget: { max_tokens: 50 } });

    // A case's run spends under the eval's budget: raising it alone is refused, with where to raise.
    const alone = await platform.http('POST', `/runs/${runId}.one/raise-budget`, { org, body: { max_tokens: 1_000_000 } });
    expect(alone.status).toBe(422);
    expect(alone.body.detail).toContain(runId);

    expect((await platform.http('POST', `/runs/${runId}/raise-budget`, { org, body: { max_tokens: 1_000_000 } })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'awaiting_review', 120_000);
    for (const c of cases) {
      await platform.waitForStatus(org, `${runId}.${c.id}`, 'done');
      const raised = (await eventsOf(`${runId}.${c.id}`)).filter((e) => e.type === 'budget_raised');
      expect(raised.map((e) => e.payload.previous)).toEqual([{ max_tokens: 50 }]);
    }
    const state = (await platform.http('GET', `/runs/${runId}`, { org })).body.state;
    expect(state).toMatchObject({ done: 2, budget: { max_tokens: 1_000_000 } });

    // Every call of the cases' runs was reserved once, under the eval's run id, and settled to what it used.
    const stepUsage = (await Promise.all(cases.map((c) => eventsOf(`${runId}.${c.id}`))))
      .flat()
      .filter((e) => e.type === 'step_completed' && e.payload.usage)
      .map((e) => e.payload.usage as { prompt_tokens: number; completion_tokens: number });
    expect(stepUsage.length).toBeGreaterThan(0);
    const reservations = await platform.query<{ run_id: string; settled: boolean; tokens: string }>('SELECT run_id, settled, tokens::text FROM budget_reservations WHERE org = $1', [org]);
    expect(reservations.every((r) => r.run_id === runId && r.settled)).toBe(true);
    expect(reservations).toHaveLength(stepUsage.length);
    expect(reservations.reduce((n, r) => n + Number(r.tokens), 0)).toBe(stepUsage.reduce((n, u) => n + u.prompt_tokens + u.completion_tokens, 0));
  }, 240_000);
});
