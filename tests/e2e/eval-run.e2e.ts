import { roll } from '@agentrun/activities';
import { CASE_ERROR_TYPES } from '@agentrun/contracts';
import { Platform, uniqueId } from '../support/platform';
import { waitFor } from '../support/wait';

interface EvalState {
  status: string;
  total: number;
  done: number;
  counts: { ok: number; failed: number; ungraded: number };
  score: number | null;
  cases: Record<string, { status: string; attempts?: number; error_type?: string; score?: number }>;
  approved_by?: string;
  parent_run_id?: string;
}

/** The case ids an `eval.start` with `cases: N` gets; the test checks the run really has them. */
const caseIdsOf = (n: number): string[] => Array.from({ length: n }, (_, i) => `case-${String(i + 1).padStart(3, '0')}`);

/**
 * A fresh run id whose rolls include a hiccup on the first attempt of some case that then passes the
 * benchmark (a failed case's view carries no attempt count, so the retry must show on a passing case),
 * and a benchmark failure on some case, with no case hiccuping on all of its attempts. The GPU worker seeds its rolls by run id and case with the same
 * `roll`, so a run with this id retries a case and fails one on every execution, not just on most.
 */
function runIdWithHiccupAndFailure(prefix: string, caseIds: string[], hiccupFraction: number, failFraction: number): string {
  for (;;) {
    const id = uniqueId(prefix);
    const hiccups = caseIds.some((c) => roll(`${id}:${c}:attempt1`) < hiccupFraction && roll(`${id}:${c}`) >= failFraction);
    const fails = caseIds.some((c) => roll(`${id}:${c}`) < failFraction);
    // Every case gets past its hiccups within the workflow's 8 attempts, or the run would fail instead.
    const settles = caseIds.every((c) => Array.from({ length: 8 }, (_, i) => roll(`${id}:${c}:attempt${i + 1}`)).some((r) => r >= hiccupFraction));
    if (hiccups && fails && settles) return id;
  }
}

describe('EvalRun and its console', () => {
  // Hiccups on 40% of attempts; 4 ticks of 150 ms per case.
  const HICCUP_PER_MILLE = 400;
  const platform = new Platform({ CASE_HICCUP_PER_MILLE: String(HICCUP_PER_MILLE), CASE_TICK_MS: '150', EVAL_CASE_HEARTBEAT_S: '2' });
  const org = 'acme';
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  const stateOf = async (runId: string): Promise<EvalState> => (await platform.http('GET', `/runs/${runId}`, { org })).body.state as EvalState;
  // Every eval names a reviewer (there are no default ones); a test that is about reviewers names its own.
  const startEval = (body: Record<string, unknown>, headers: Record<string, string> = {}) => platform.http('POST', '/evals', { org, body: { reviewers: ['alice'], ...body }, headers });

  it('runs its cases with failures and hiccups, waits for review, and a listed reviewer publishes it once', async () => {
    const caseIds = caseIdsOf(8);
    const runId = runIdWithHiccupAndFailure('eval', caseIds, HICCUP_PER_MILLE / 1000, 0.3);
    const started = await startEval({ run_id: runId, model: 'm-1', suite: 'smoke', cases: 8, fail_fraction: 0.3, reviewers: ['alice'] });
    expect(started.status).toBe(202);
    await platform.waitForStatus(org, runId, 'awaiting_review');
    const state = await stateOf(runId);
    expect(state).toMatchObject({ total: 8, done: 8 });
    expect(Object.keys(state.cases).sort()).toEqual(caseIds);
    expect(state.counts.ok + state.counts.failed).toBe(8);
    const views = Object.values(state.cases);
    // Hiccups show only as attempts: a case is failed only by the benchmark, never by a hiccup.
    expect(views.some((c) => (c.attempts ?? 1) > 1)).toBe(true);
    // Which cases fail, and with which error type, is seeded by run and case (the GPU worker's `roll`):
    // the run id was chosen so at least one does. Each failed case's view names its type.
    const expectedFailures = Object.fromEntries(
      caseIds.filter((c) => roll(`${runId}:${c}`) < 0.3).map((c) => [c, CASE_ERROR_TYPES[Math.floor(roll(`${runId}:${c}:error`) * CASE_ERROR_TYPES.length)]]),
    );
    expect(Object.keys(expectedFailures).length).toBeGreaterThan(0);
    const failures = Object.fromEntries(Object.entries(state.cases).filter(([, c]) => c.status === 'failed').map(([id, c]) => [id, c.error_type]));
    expect(failures).toEqual(expectedFailures);
    expect(state.counts.failed).toBe(Object.keys(expectedFailures).length);
    const [{ n }] = await platform.query<{ n: string }>(`SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)`, [`${org}/${runId}:`]);
    expect(Number(n)).toBe(8);

    const stranger = await platform.http('POST', `/runs/${runId}/approve`, { org, body: { reviewer: 'mallory' } });
    expect(stranger.status).toBe(422);
    expect(stranger.body.reason).toBe('not_a_reviewer');
    const approve = () => platform.http('POST', `/runs/${runId}/approve`, { org, body: { reviewer: 'alice' }, headers: { 'Idempotency-Key': `approve-${runId}` } });
    expect((await approve()).status).toBe(202);
    expect((await approve()).body.outcome).toBe('duplicate');
    await platform.waitForStatus(org, runId, 'published');
    expect((await stateOf(runId)).approved_by).toBe('alice');
    const published = await platform.query<{ n: string }>(
      `SELECT count(*) AS n FROM run_events WHERE org = $1 AND run_id = $2 AND event->'payload'->'state'->>'status' = 'published' AND type = 'status_changed'`,
      [org, runId],
    );
    expect(Number(published[0].n)).toBe(1);

    // retry-failed carries exactly the failed cases, with a parent link.
    const failed = Object.entries(state.cases).filter(([, c]) => c.status === 'failed').map(([id]) => id).sort();
    expect(failed.length).toBeGreaterThan(0);
    const retry = await platform.http('POST', `/runs/${runId}/retry-failed`, { org, body: {} });
    expect(retry.status).toBe(202);
    const retryId = `${runId}-retry-1`;
    await platform.waitForStatus(org, retryId, 'awaiting_review');
    const retried = await platform.http('GET', `/runs/${retryId}`, { org });
    expect(Object.keys(retried.body.state.cases).sort()).toEqual(failed);
    expect(retried.body.parent_run_id).toBe(runId);
  });

  it('cancel stops the cases within a heartbeat and nothing more runs', async () => {
    const runId = uniqueId('eval-cancel');
    await startEval({ run_id: runId, model: 'm-1', suite: 'long', cases: 40, fail_fraction: 0 });
    await waitFor('a first finished case', async () => ((await stateOf(runId))?.done ?? 0) >= 1, 60_000);
    expect((await platform.http('POST', `/runs/${runId}/cancel`, { org, body: {} })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'cancelled');
    const state = await stateOf(runId);
    expect(state.done).toBeLessThan(40);
    const countEffects = async () =>
      Number((await platform.query<{ n: string }>(`SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)`, [`${org}/${runId}:`]))[0].n);
    // Every effect is a finished case; nothing ran after the cancel.
    expect(await countEffects()).toBe(state.done);
    const statuses = (await platform.query<{ s: string }>(`SELECT event->'payload'->'state'->>'status' AS s FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq`, [org, runId])).map((r) => r.s);
    expect(statuses.slice(-2)).toEqual(['cancelling', 'cancelled']);
  });

  it('retry-failed answers 409 while a run is active and for another org 404', async () => {
    const runId = uniqueId('eval-busy');
    await startEval({ run_id: runId, model: 'm-1', suite: 'long', cases: 30, fail_fraction: 0.5 });
    await platform.waitForStatus(org, runId, 'running');
    const busy = await platform.http('POST', `/runs/${runId}/retry-failed`, { org, body: {} });
    expect(busy.status).toBe(409);
    expect(busy.body.reason).toBe('run_active');
    expect((await platform.http('POST', `/runs/${runId}/retry-failed`, { org: 'globex', body: {} })).status).toBe(404);
    expect((await platform.http('POST', `/runs/${runId}/approve`, { org: 'globex', body: { reviewer: 'alice' } })).status).toBe(404);
    await platform.http('POST', `/runs/${runId}/cancel`, { org, body: {} });
    await platform.waitForStatus(org, runId, 'cancelled');
  });

  it('retry-failed of a finished run without failed cases answers 409 nothing_to_retry', async () => {
    const runId = uniqueId('eval-clean');
    expect((await startEval({ run_id: runId, model: 'm-1', suite: 'smoke', cases: 1, fail_fraction: 0 })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'awaiting_review');
    const retry = await platform.http('POST', `/runs/${runId}/retry-failed`, { org, body: {} });
    expect(retry.status).toBe(409);
    expect(retry.body.reason).toBe('nothing_to_retry');
  });

  it('POST /evals validates its body', async () => {
    expect((await startEval({ model: 'm', suite: 's' })).status).toBe(400);
    expect((await startEval({ model: 'm', suite: 's', cases: 501 })).status).toBe(400);
    expect((await startEval({ model: 'm', suite: 's', cases: 3, fail_fraction: 2 })).status).toBe(400);
  });
});

describe('errored cases ungraded (AGENTRUN_ERRORED_TURN_UNGRADED)', () => {
  it('the same seeded run: off, every failure scores 0; on, failures the agent did not cause are ungraded', async () => {
    const runId = uniqueId('eval-seeded');
    const results: Record<string, { counts: { ok: number; failed: number; ungraded: number }; score: number | null; cases: Record<string, { status: string; error_type?: string }> }> = {};
    // Two orgs, so the two runs have distinct workflow ids; the rolls are seeded by run id and case.
    for (const [flag, org] of [['false', 'acme'], ['true', 'acme-flagged']]) {
      const platform = new Platform({ AGENTRUN_ERRORED_TURN_UNGRADED: flag, CASE_TICK_MS: '20', CASE_HICCUP_PER_MILLE: '0' });
      await platform.start();
      try {
        await platform.http('POST', '/evals', { org, body: { run_id: runId, model: 'm', suite: 's', cases: 24, fail_fraction: 0.5, reviewers: ['alice'] } });
        await platform.waitForStatus(org, runId, 'awaiting_review');
        results[flag] = (await platform.http('GET', `/runs/${runId}`, { org })).body.state;
      } finally {
        await platform.stop();
      }
    }
    const off = results.false;
    const on = results.true;
    expect(off.counts.ungraded).toBe(0);
    const notTheAgents = Object.values(off.cases).filter((c) => c.status === 'failed' && c.error_type !== 'agent_error').length;
    expect(notTheAgents).toBeGreaterThan(0);
    expect(on.counts).toEqual({ ok: off.counts.ok, failed: off.counts.failed - notTheAgents, ungraded: notTheAgents });
    // Every case ungraded with the flag on failed with it off, with the same error; an agent's own error is failed either way.
    const ungradedOn = Object.entries(on.cases).filter(([, c]) => c.status === 'ungraded');
    expect(ungradedOn.map(([id, c]) => ({ id, status: off.cases[id].status, error_type: off.cases[id].error_type === c.error_type }))).toEqual(
      ungradedOn.map(([id]) => ({ id, status: 'failed', error_type: true })),
    );
    const agentErrors = Object.entries(off.cases).filter(([, c]) => c.error_type === 'agent_error');
    expect(agentErrors.map(([id]) => ({ id, status: on.cases[id].status }))).toEqual(agentErrors.map(([id]) => ({ id, status: 'failed' })));
    expect(on.score).not.toBe(off.score);
  });

  it('retry-failed carries exactly the failed and the ungraded cases', async () => {
    const platform = new Platform({ AGENTRUN_ERRORED_TURN_UNGRADED: 'true', CASE_TICK_MS: '20', CASE_HICCUP_PER_MILLE: '0' });
    await platform.start();
    try {
      const runId = uniqueId('eval-retry');
      await platform.http('POST', '/evals', { org: 'acme', body: { run_id: runId, model: 'm', suite: 's', cases: 24, fail_fraction: 0.5, reviewers: ['alice'] } });
      await platform.waitForStatus('acme', runId, 'awaiting_review');
      const state = (await platform.http('GET', `/runs/${runId}`, { org: 'acme' })).body.state as { cases: Record<string, { status: string }> };
      const expected = Object.entries(state.cases).filter(([, c]) => c.status === 'failed' || c.status === 'ungraded').map(([id]) => id).sort();
      expect(Object.values(state.cases).some((c) => c.status === 'ungraded')).toBe(true);
      expect((await platform.http('POST', `/runs/${runId}/retry-failed`, { org: 'acme', body: {} })).status).toBe(202);
      await platform.waitForStatus('acme', `${runId}-retry-1`, 'awaiting_review');
      const retry = await platform.http('GET', `/runs/${runId}-retry-1`, { org: 'acme' });
      expect(Object.keys(retry.body.state.cases).sort()).toEqual(expected);
      expect(retry.body.parent_run_id).toBe(runId);
    } finally {
      await platform.stop();
    }
  });
});

describe('eval commands over Kafka', () => {
  const platform = new Platform({ CASE_TICK_MS: '20', CASE_HICCUP_PER_MILLE: '0' });
  beforeAll(() => platform.start());
  afterAll(() => platform.stop());

  it("another org's eval run is no run: approve, cancel and retry-failed are unknown_run", async () => {
    const outcomes = await platform.follow<{ command_id: string; outcome: string; reason?: string }>('agentrun.command-results.v1');
    const runId = uniqueId('eval-kafka');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'eval.start', org: 'acme', run_id: runId, payload: { model: 'm', suite: 's', cases: 4, reviewers: ['alice'] } });
    await platform.waitForStatus('acme', runId, 'awaiting_review');
    const foreign = [
      { command_id: uniqueId('c'), type: 'eval.approve', org: 'globex', run_id: runId, payload: { reviewer: 'alice' } },
      { command_id: uniqueId('c'), type: 'eval.cancel', org: 'globex', run_id: runId, payload: {} },
      { command_id: uniqueId('c'), type: 'eval.retry_failed', org: 'globex', run_id: runId, payload: {} },
    ];
    for (const command of foreign) await platform.publishCommand(command);
    await waitFor('three outcomes', () => foreign.every((c) => outcomes.some((o) => o.value.command_id === c.command_id)), 60_000);
    for (const command of foreign) {
      expect(outcomes.find((o) => o.value.command_id === command.command_id)?.value).toMatchObject({ outcome: 'rejected', reason: 'unknown_run' });
    }
    // The owner approves over Kafka.
    const approve = { command_id: uniqueId('c'), type: 'eval.approve', org: 'acme', run_id: runId, payload: { reviewer: 'alice' } };
    await platform.publishCommand(approve);
    await platform.waitForStatus('acme', runId, 'published');
  });

  it('an eval.start without reviewers (absent or empty) is rejected invalid_payload, and starts nothing (issue 16, finding 6)', async () => {
    const outcomes = await platform.follow<{ command_id: string; outcome: string; reason?: string; message?: string }>('agentrun.command-results.v1');
    const starts = [{ model: 'm', suite: 's', cases: 2 }, { model: 'm', suite: 's', cases: 2, reviewers: [] }].map((payload) => ({
      command_id: uniqueId('c'),
      type: 'eval.start',
      org: 'acme',
      run_id: uniqueId('eval-nobody'),
      payload,
    }));
    for (const command of starts) await platform.publishCommand(command);
    await waitFor('both outcomes', () => starts.every((c) => outcomes.some((o) => o.value.command_id === c.command_id)), 60_000);
    for (const command of starts) {
      expect(outcomes.find((o) => o.value.command_id === command.command_id)?.value).toMatchObject({
        outcome: 'rejected',
        reason: 'invalid_payload',
        message: expect.stringMatching(/^an eval needs at least one reviewer/),
      });
      expect((await platform.http('GET', `/runs/${command.run_id}`, { org: 'acme' })).status).toBe(404);
    }
  });
});
