import type { ModelCallUsage, RunEventEnvelope } from '@agentrun/contracts';
import { Platform, uniqueId } from '../support/platform';

/**
 * A model call whose completion is lost after its effect was recorded (the fault point
 * `model.lose_completion_every=2`: every second recorded call fails on its way back to Temporal) is
 * retried; the retry finds the recorded reply. Nothing counts twice: one reservation per call, settled
 * to what the call used; the run's usage, its steps' usage and the org's `GET /usage` agree.
 */
describe('a lost model completion, retried', () => {
  const price = { input_usd_per_million: 3, output_usd_per_million: 15 };
  const platform = new Platform({ AGENTRUN_MODEL_PRICES: JSON.stringify({ scripted: price }), AGENTRUN_MODEL_MAX_TOKENS: '200', AGENTRUN_FAULTS: 'model.lose_completion_every=2' });
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  it('does not count twice: reservations, run usage and org usage agree', async () => {
    const org = uniqueId('lost');
    const runs = [uniqueId('lost-run'), uniqueId('lost-run')];
    for (const runId of runs) {
      const res = await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: '[scenario:agent] find the parser notes', max_steps: 8, policy: 'llm', budget: { max_tokens: 100_000 } } });
      expect(res.status).toBe(202);
    }
    let lost = 0;
    let calls = 0;
    let tokens = 0;
    for (const runId of runs) {
      await platform.waitForStatus(org, runId, 'done');
      const steps = (await platform.query<{ event: RunEventEnvelope }>(`SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'step_completed' ORDER BY seq`, [org, runId]))
        .map((r) => r.event.payload as { kind: string; attempt: number; duplicate: boolean; usage?: ModelCallUsage })
        .filter((s) => s.kind === 'llm');
      // The lost ones came back from the effect ledger (with the attempt that made them).
      lost += steps.filter((s) => s.duplicate).length;
      const used = steps.map((s) => s.usage!.prompt_tokens + s.usage!.completion_tokens);
      const reservations = await platform.query<{ settled: boolean; tokens: string }>('SELECT settled, tokens::text FROM budget_reservations WHERE org = $1 AND run_id = $2 ORDER BY created_at', [org, runId]);
      expect(reservations.map((r) => [r.settled, Number(r.tokens)])).toEqual(used.map((n) => [true, n]));
      const run = await platform.http('GET', `/runs/${runId}`, { org });
      expect(run.body.state.usage).toMatchObject({ calls: steps.length, prompt_tokens: steps.reduce((n, s) => n + s.usage!.prompt_tokens, 0), completion_tokens: steps.reduce((n, s) => n + s.usage!.completion_tokens, 0) });
      calls += steps.length;
      tokens += used.reduce((n, u) => n + u, 0);
    }
    // The fault did happen: at least one completion of each two was lost and retried.
    expect(lost).toBeGreaterThanOrEqual(Math.floor(calls / 3));
    const usage = await platform.http('GET', '/usage?group_by=run', { org });
    expect(usage.body.total.calls).toBe(calls);
    expect(usage.body.total.prompt_tokens + usage.body.total.completion_tokens).toBe(tokens);
  });

  it("a research child's model call is reserved against the run's own budget and counted in its usage", async () => {
    const org = uniqueId('research');
    const runId = uniqueId('research-run');
    // The scripted policy asks a research child every few steps.
    const res = await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: 'summarise the workspace', max_steps: 12, budget: { max_tokens: 1_000_000 } } });
    expect(res.status).toBe(202);
    await platform.waitForStatus(org, runId, 'done');
    const steps = (await platform.query<{ event: RunEventEnvelope }>(`SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'step_completed' ORDER BY seq`, [org, runId])).map(
      (r) => r.event.payload as { kind: string; usage?: ModelCallUsage },
    );
    const research = steps.filter((s) => s.kind === 'research');
    expect(research.length).toBeGreaterThanOrEqual(1);
    expect(research.every((s) => s.usage !== undefined && s.usage.prompt_tokens > 0)).toBe(true);
    const calls = steps.filter((s) => s.usage !== undefined);
    const run = await platform.http('GET', `/runs/${runId}`, { org });
    expect(run.body.state.usage).toMatchObject({ calls: calls.length, prompt_tokens: calls.reduce((n, s) => n + s.usage!.prompt_tokens, 0) });
    // Every call (the children's under the parent's run id) reserved once against the run's limits, and settled.
    const reservations = await platform.query<{ settled: boolean; tokens: string }>('SELECT settled, tokens::text FROM budget_reservations WHERE org = $1 AND run_id = $2', [org, runId]);
    expect(reservations).toHaveLength(calls.length);
    expect(reservations.every((r) => r.settled)).toBe(true);
    expect(reservations.reduce((n, r) => n + Number(r.tokens), 0)).toBe(calls.reduce((n, s) => n + s.usage!.prompt_tokens + s.usage!.completion_tokens, 0));
  });
});
