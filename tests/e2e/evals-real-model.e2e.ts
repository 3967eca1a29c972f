import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { CaseResultRow } from '@agentrun/contracts';
import { loadSuite } from '@agentrun/evals';
import { REAL_MODEL, REPO_ROOT, startRealModel, type RealModelProcess } from '../support/model-real';
import { Platform, uniqueId } from '../support/platform';

/**
 * A real language model (SmolLM2-135M-Instruct on the CPU) under the platform: the shipped QA suite
 * evaluated end to end through the `generate` solver, and an `llm`-policy agent run answered by it. The
 * model's answers are its own (greedy, so the same every time on one build), so the test holds the
 * platform to what it must do with them, and prints the score.
 */
describe('Evals against a real model', () => {
  // The real model is the platform's default endpoint here, so the agent's model calls reach it too.
  const env: Record<string, string> = { EVAL_CASE_HEARTBEAT_S: '10' };
  const platform = new Platform(env);
  const org = 'acme';
  let model: RealModelProcess;

  beforeAll(async () => {
    const gguf = resolve(REPO_ROOT, '.stack/opt/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf');
    if (!existsSync(gguf)) execFileSync('bash', [resolve(REPO_ROOT, 'deploy/local/model-real.sh'), 'install'], { stdio: 'inherit' });
    model = await startRealModel();
    Object.assign(env, { MODEL_BASE_URL: model.url, MODEL_NAME: REAL_MODEL, MODEL_TIMEOUT_MS: '60000' });
    await platform.start();
  }, 300_000);
  afterAll(async () => {
    await platform.stop();
    expect(await model?.stop()).toBe(0);
  });

  it('evaluates the shipped QA suite: every case answered, scored and its tokens counted', async () => {
    const suite = loadSuite('qa');
    const runId = uniqueId('eval-real');
    const started = await platform.http('POST', '/evals', {
      org,
      body: { run_id: runId, model: REAL_MODEL, reviewers: ['alice'], dataset: { name: 'qa' }, solver: { name: 'generate', max_tokens: 24, temperature: 0 }, scorers: ['exact', 'includes'] },
    });
    expect(started.status).toBe(202);
    const t0 = Date.now();
    await platform.waitForStatus(org, runId, 'awaiting_review', 600_000);
    const seconds = (Date.now() - t0) / 1000;
    const state = (await platform.http('GET', `/runs/${runId}`, { org })).body.state;
    // A small model may be wrong, never unanswered: every case is graded.
    expect(state.counts).toEqual({ ok: suite.cases.length, failed: 0, ungraded: 0 });
    const rows = (await platform.http('GET', `/runs/${runId}/results?limit=500`, { org })).body.cases as CaseResultRow[];
    expect(rows).toHaveLength(suite.cases.length);
    for (const row of rows) {
      expect(row.result?.output).toEqual(expect.any(String));
      expect(row.usage!.prompt_tokens).toBeGreaterThan(0);
      expect(row.usage!.completion_tokens).toBeGreaterThan(0);
      expect(row.usage!.completion_tokens).toBeLessThanOrEqual(24);
    }
    const mean = (scorer: string) => rows.reduce((sum, r) => sum + (r.result!.scores.find((s) => s.scorer === scorer)?.value ?? 0), 0) / rows.length;
    const tokens = rows.reduce((sum, r) => sum + r.usage!.completion_tokens, 0);
    // It knows some of it: the capitals, the planets. Printed for the record (docs/BENCHMARKS.md).
    expect(mean('includes')).toBeGreaterThan(0.2);
    console.log(
      `real model, qa suite: exact ${mean('exact').toFixed(3)}, includes ${mean('includes').toFixed(3)}, score ${state.score}; ` +
        `${rows.length} cases in ${seconds.toFixed(1)} s, ${tokens} completion tokens (${(tokens / seconds).toFixed(1)} tokens/s through the platform)`,
    );
  }, 700_000);

  it.each([
    ['mcq', { name: 'generate', max_tokens: 8, temperature: 0 }],
    ['agent', { name: 'agent', max_steps: 4 }],
  ])('evaluates the shipped %s suite with its default scorers', async (suiteName, solver) => {
    const suite = loadSuite(suiteName);
    const runId = uniqueId(`eval-real-${suiteName}`);
    expect((await platform.http('POST', '/evals', { org, body: { run_id: runId, model: REAL_MODEL, reviewers: ['alice'], dataset: { name: suiteName }, solver } })).status).toBe(202);
    const t0 = Date.now();
    await platform.waitForStatus(org, runId, 'awaiting_review', 600_000);
    const state = (await platform.http('GET', `/runs/${runId}`, { org })).body.state;
    expect(state.counts).toEqual({ ok: suite.cases.length, failed: 0, ungraded: 0 });
    console.log(`real model, ${suiteName} suite (${suite.manifest.scorers.join(', ')}): score ${state.score}, ${suite.cases.length} cases in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }, 700_000);

  it('answers an llm-policy agent run', async () => {
    const runId = uniqueId('agent-real');
    const started = await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: 'What is the capital of France? Answer in one word.', policy: 'llm', max_steps: 4 } });
    expect(started.status).toBe(202);
    await platform.waitForStatus(org, runId, 'done', 300_000);
    const finished = await platform.query<{ answer: string | null }>(
      `SELECT event->'payload'->>'answer' AS answer FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'run_finished'`,
      [org, runId],
    );
    expect(finished[0]?.answer).toEqual(expect.stringMatching(/\S/));
    console.log(`real model, llm agent answer: ${JSON.stringify(finished[0]?.answer)}`);
  }, 400_000);
});
