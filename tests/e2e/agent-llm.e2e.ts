import type { ModelCallUsage, RunEventEnvelope } from '@agentrun/contracts';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';
import { budgetCli } from '../support/token-cli';
/**
 * The `llm` policy against the deterministic local model server: tokens, cost and usage, budgets,
 * tool calls, retries and refusals. (Split from agent-run.e2e.ts so the two run side by side.)
 */
describe('the llm policy against the local model server', () => {
  const price = { input_usd_per_million: 3, output_usd_per_million: 15 };
  // A small completion limit keeps a call's worst case (its prompt and 200 tokens) near what it uses.
  const platform = new Platform({ AGENTRUN_TOOL_HEARTBEAT_S: '5', AGENTRUN_MODEL_PRICES: JSON.stringify({ scripted: price }), AGENTRUN_MODEL_MAX_TOKENS: '200' });
  const org = 'acme';
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  const runWith = async (scenario: string, maxSteps = 12, runOrg = org) => {
    const runId = uniqueId(`llm-${scenario.replace(/_/g, '-')}`);
    await platform.publishCommand({
      command_id: uniqueId('c'),
      type: 'agent.start',
      org: runOrg,
      run_id: runId,
      payload: { goal: `[scenario:${scenario}] find the parser notes`, max_steps: maxSteps, policy: 'llm' },
    });
    return runId;
  };
  const stepsOf = async (runId: string, runOrg = org) =>
    (await platform.query<{ event: RunEventEnvelope }>(`SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'step_completed' ORDER BY seq`, [runOrg, runId])).map(
      (r) => r.event.payload as { kind: string; tool?: string; attempt: number; output: string; usage?: ModelCallUsage },
    );

  it("every model call records its tokens and cost; the run's state and the org's GET /usage add them up", async () => {
    const spender = uniqueId('spend');
    const runs = [await runWith('agent', 12, spender), await runWith('agent', 12, spender)];
    const perRun = new Map<string, { calls: number; prompt_tokens: number; completion_tokens: number; cost_usd: number }>();
    for (const runId of runs) {
      await platform.waitForStatus(spender, runId, 'done');
      const calls = (await stepsOf(runId, spender)).filter((s) => s.kind === 'llm');
      expect(calls.length).toBeGreaterThanOrEqual(2);
      // The local server reports usage (words counted), so nothing is estimated; the price is the table's.
      for (const { usage } of calls) {
        expect(usage).toMatchObject({ model: 'scripted', priced: true });
        expect(usage!.estimated).toBeUndefined();
        expect(usage!.prompt_tokens).toBeGreaterThan(0);
        expect(usage!.cost_usd).toBeCloseTo((usage!.prompt_tokens * price.input_usd_per_million + usage!.completion_tokens * price.output_usd_per_million) / 1e6, 8);
      }
      const sum = {
        calls: calls.length,
        prompt_tokens: calls.reduce((n, c) => n + c.usage!.prompt_tokens, 0),
        completion_tokens: calls.reduce((n, c) => n + c.usage!.completion_tokens, 0),
        cost_usd: calls.reduce((n, c) => n + c.usage!.cost_usd, 0),
      };
      perRun.set(runId, sum);
      const run = await platform.http('GET', `/runs/${runId}`, { org: spender });
      expect(run.body.state.usage).toMatchObject({ calls: sum.calls, prompt_tokens: sum.prompt_tokens, completion_tokens: sum.completion_tokens, estimated_calls: 0 });
      expect(run.body.state.usage.cost_usd).toBeCloseTo(sum.cost_usd, 8);
    }
    const listed = await platform.http('GET', '/runs', { org: spender });
    expect(listed.body.runs.map((r: { run_id: string; state: { usage?: unknown } }) => [r.run_id, Boolean(r.state.usage)]).sort()).toEqual(runs.map((r) => [r, true]).sort());

    const all = [...perRun.values()];
    const total = { calls: all.reduce((n, r) => n + r.calls, 0), prompt_tokens: all.reduce((n, r) => n + r.prompt_tokens, 0), completion_tokens: all.reduce((n, r) => n + r.completion_tokens, 0) };
    const byRun = await platform.http('GET', '/usage?group_by=run', { org: spender });
    expect(byRun.status).toBe(200);
    expect(byRun.body).toMatchObject({ group_by: 'run', total: { ...total, estimated_calls: 0, unpriced_calls: 0 }, truncated: false });
    expect(byRun.body.total.cost_usd).toBeCloseTo(all.reduce((n, r) => n + r.cost_usd, 0), 8);
    expect(Object.fromEntries(byRun.body.groups.map((g: { key: string; calls: number; prompt_tokens: number; completion_tokens: number }) => [g.key, [g.calls, g.prompt_tokens, g.completion_tokens]]))).toEqual(
      Object.fromEntries([...perRun].map(([runId, r]) => [runId, [r.calls, r.prompt_tokens, r.completion_tokens]])),
    );
    const byModel = await platform.http('GET', '/usage?group_by=model', { org: spender });
    expect(byModel.body.groups).toEqual([{ key: 'scripted', ...byRun.body.total }]);
    const today = new Date().toISOString().slice(0, 10);
    const byDay = await platform.http('GET', `/usage?group_by=day&from=${today}`, { org: spender });
    expect(byDay.body.groups.map((g: { key: string; calls: number }) => [g.key, g.calls])).toEqual([[today, total.calls]]);
    // Another org's calls are not this org's; a range before them holds nothing.
    expect((await platform.http('GET', '/usage?group_by=run', { org })).body.groups.map((g: { key: string }) => g.key)).not.toContain(runs[0]);
    expect((await platform.http('GET', '/usage?from=2020-01-01&to=2020-02-01', { org: spender })).body.total.calls).toBe(0);
    // Bad questions get a 4xx that says what is wrong: 400 outside the documented forms, 422 for a range that is not one.
    for (const [query, status, detail] of [
      ['group_by=week', 400, /group_by must be one of model, run, day/],
      ['to=2026-12-01T10:00:00', 400, /date-time with an offset/],
      ['from=2026-02-31', 422, /not a real date/],
      ['from=2026-12-02&to=2026-12-01', 422, /must be before to/],
    ] as const) {
      const bad = await platform.http('GET', `/usage?${query}`, { org: spender });
      expect({ query, status: bad.status }).toEqual({ query, status });
      expect(bad.body.detail).toMatch(detail);
    }
  });

  const eventsOf = async (runId: string, runOrg: string) =>
    (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [runOrg, runId])).map((r) => r.event);
  const tokensOf = (u: ModelCallUsage | undefined) => (u ? u.prompt_tokens + u.completion_tokens : 0);

  it('a run pauses at the model call whose worst case passes its token budget, and a raise lets it finish; each call reserved once', async () => {
    const spender = uniqueId('budget');
    const runId = uniqueId('llm-budget');
    const start = await platform.http('POST', '/agents', { org: spender, body: { run_id: runId, goal: '[scenario:agent] find the parser notes', max_steps: 12, policy: 'llm', budget: { max_tokens: 300 } } });
    expect(start.status).toBe(202);
    await platform.waitForStatus(spender, runId, 'paused');
    const exhausted = await waitFor('the budget_exhausted event', async () => (await eventsOf(runId, spender)).find((e) => e.type === 'budget_exhausted'), 30_000);
    const stepsBefore = await stepsOf(runId, spender);
    const before = stepsBefore.filter((s) => s.kind === 'llm');
    // Every call before it fitted and ran; this one's worst case (its prompt and 200 tokens) did not.
    expect(before.length).toBeGreaterThanOrEqual(1);
    const spent = before.reduce((n, s) => n + tokensOf(s.usage), 0);
    expect(exhausted.payload).toMatchObject({ scope: 'run', limit: 'tokens', max: 300, spent, reserved: 0, left: 300 - spent, step: stepsBefore.length });
    expect(spent + (exhausted.payload.needed as number)).toBeGreaterThan(300);
    expect(exhausted.payload.state).toMatchObject({ status: 'paused', reason: 'budget_exhausted', budget: { max_tokens: 300 } });
    // A raise that is not higher is refused by the workflow's validator, and never reaches history.
    const lower = await platform.http('POST', `/runs/${runId}/raise-budget`, { org: spender, body: { max_tokens: 300 } });
    expect(lower.status).toBe(422);
    expect(lower.body.detail).toMatch(/max_tokens must be higher than the run's current 300/);
    const raised = await platform.http('POST', `/runs/${runId}/raise-budget`, { org: spender, body: { max_tokens: 100_000 } });
    expect(raised.status).toBe(202);
    await platform.waitForStatus(spender, runId, 'done');
    const events = await eventsOf(runId, spender);
    expect(events.filter((e) => e.type === 'budget_raised').map((e) => e.payload.previous)).toEqual([{ max_tokens: 300 }]);
    const calls = (await stepsOf(runId, spender)).filter((s) => s.kind === 'llm');
    const run = await platform.http('GET', `/runs/${runId}`, { org: spender });
    expect(run.body.state).toMatchObject({ status: 'done', budget: { max_tokens: 100_000 }, usage: { calls: calls.length } });
    // One reservation per call, each settled to what the call used.
    const reservations = await platform.query<{ key: string; settled: boolean; tokens: string }>('SELECT key, settled, tokens::text FROM budget_reservations WHERE org = $1 AND run_id = $2 ORDER BY created_at', [spender, runId]);
    expect(reservations.map((r) => [r.settled, Number(r.tokens)])).toEqual(calls.map((c) => [true, tokensOf(c.usage)]));
    expect(new Set(reservations.map((r) => r.key)).size).toBe(reservations.length);
  });

  it("an org's monthly budget pauses its runs (npm run budget), refuses a raise past it, and resume goes on once it is raised", async () => {
    const spender = uniqueId('orgbudget');
    const db = stackUrls().databaseUrl(platform.database);
    expect(await budgetCli(db, 'set', '--org', spender, '--monthly-usd', '0.000001')).toMatchObject({ code: 0, stdout: `org ${spender}: monthly budget $0.000001\n` });
    expect((await budgetCli(db, 'set', '--org', spender, '--monthly-usd', '-3')).code).toBe(2);
    const runId = await runWith('agent', 12, spender);
    await platform.waitForStatus(spender, runId, 'paused');
    const exhausted = (await eventsOf(runId, spender)).find((e) => e.type === 'budget_exhausted');
    expect(exhausted?.payload).toMatchObject({ scope: 'org', limit: 'usd', max: 0.000001, spent: 0, step: 0 });
    const refused = await platform.http('POST', `/runs/${runId}/raise-budget`, { org: spender, body: { max_cost_usd: 5 } });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toMatch(/monthly budget of \$0.000001/);
    expect(await budgetCli(db, 'set', '--org', spender, '--monthly-usd', '10')).toMatchObject({ code: 0 });
    expect((await platform.http('POST', `/runs/${runId}/resume`, { org: spender })).status).toBe(202);
    await platform.waitForStatus(spender, runId, 'done');
    const listed = await budgetCli(db, 'list', '--org', spender);
    const run = await platform.http('GET', `/runs/${runId}`, { org: spender });
    expect(listed.stdout).toContain(`${spender}\tmonthly $10\tspent $${run.body.state.usage.cost_usd}\treserved $0`);
    expect(await budgetCli(db, 'clear', '--org', spender)).toMatchObject({ code: 0, stdout: `org ${spender}: budget cleared\n` });
  });

  it('the model calls tools on their lanes, reads their results and answers', async () => {
    const runId = await runWith('agent');
    await platform.waitForStatus(org, runId, 'done');
    const steps = await stepsOf(runId);
    expect(steps.map((s) => s.tool ?? s.kind)).toEqual(['llm', 'search', 'embed', 'llm']);
    const run = await platform.http('GET', `/runs/${runId}`, { org });
    expect(run.body.last_events.at(-1).payload.answer).toBeTruthy();
  });

  it.each(['rate_limited', 'server_error'])('%s replies are retried by policy and the run still answers', async (scenario) => {
    const runId = await runWith(scenario);
    await platform.waitForStatus(org, runId, 'done');
    const steps = await stepsOf(runId);
    expect(steps[0]).toMatchObject({ kind: 'llm', attempt: 3 });
    expect(steps.at(-1)?.kind).toBe('llm');
  });

  it('malformed tool arguments go back to the model as an error, and it recovers', async () => {
    const runId = await runWith('malformed_args');
    await platform.waitForStatus(org, runId, 'done');
    const steps = await stepsOf(runId);
    // The broken call ran nothing; the model was asked again, then used its tools and answered.
    expect(steps.slice(0, 2).map((s) => s.kind)).toEqual(['llm', 'llm']);
    expect(steps.filter((s) => s.kind === 'tool').length).toBeGreaterThan(0);
    expect(steps.at(-1)?.kind).toBe('llm');
  });

  it('a reply cut short by the token limit is not taken as the answer: the model is asked to continue', async () => {
    const runId = await runWith('length', 3);
    await platform.waitForStatus(org, runId, 'done');
    const steps = await stepsOf(runId);
    expect(steps.slice(0, 2).map((s) => s.kind)).toEqual(['llm', 'llm']);
    const run = await platform.http('GET', `/runs/${runId}`, { org });
    expect(run.body.last_events.at(-1).payload.answer).toBeUndefined();
  });

  it('a model that refuses the request fails the run at once, without retries', async () => {
    const runId = await runWith('bad_request');
    await platform.waitForStatus(org, runId, 'failed');
    const run = await platform.http('GET', `/runs/${runId}`, { org });
    expect(run.body.state.message).toMatch(/refused/);
  });
});
