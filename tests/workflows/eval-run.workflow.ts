import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { approveUpdate, BUDGET_EXHAUSTED, cancelEvalSignal, evalStatusQuery, raiseBudgetUpdate, statusQuery, type AgentRun, type CaseRequest, type ModelCall } from '@agentrun/workflows';
import { waitFor } from '../support/wait';
import { Deferred, holdActivity, modelReply, oneToN, rejectionOf, seqsOf, WorkflowTestEnv } from '../support/workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await WorkflowTestEnv.start();
});
afterAll(async () => {
  await env?.stop();
});

describe('EvalRun', () => {
  it('fans cases out within its parallelism, grades failures, and publishes once a listed reviewer approves', async () => {
    const firstCase = new Deferred();
    let inFlight = 0;
    let mostInFlight = 0;
    const rig = env.rig({
      gpuEval: {
        runCase: async (request: CaseRequest) => {
          inFlight += 1;
          mostInFlight = Math.max(mostInFlight, inFlight);
          try {
            const { attempt } = Context.current().info;
            if (request.case_id === 'c1') await holdActivity(firstCase.promise);
            if (request.case_id === 'c2') throw ApplicationFailure.nonRetryable('wrong answer', 'CaseFailed', { error_type: 'agent_error' });
            if (request.case_id === 'c3') throw ApplicationFailure.nonRetryable('sandbox lost', 'CaseFailed', { error_type: 'infra_error' });
            if (request.case_id === 'c4' && attempt === 1) throw new Error('GPU hiccup');
            return { key: request.key, case_id: request.case_id, ok: true, score: 1, attempt, duplicate: false };
          } finally {
            inFlight -= 1;
          }
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('review');
      const handle = await rig.startEval('review', { case_ids: ['c1', 'c2', 'c3', 'c4', 'c5'], parallelism: 2, errored_ungraded: true, reviewers: ['rev@acme'] });
      const approve = (command_id: string, reviewer: string) => handle.executeUpdate(approveUpdate, { args: [{ command_id, reviewer }] });

      await rig.waitForCall('runCase', 'case c1 to start', (c) => (c.input as CaseRequest).case_id === 'c1');
      expect(await rejectionOf(approve('a-early', 'rev@acme'))).toBe('the run is running, not awaiting review');
      // One slot held by c1, the other works through the rest of the queue.
      await waitFor('the four other cases', () => rig.events(runId).filter((e) => e.type === 'case_finished').length === 4, 20_000, 20);
      expect(rig.events(runId).some((e) => e.type === 'case_finished' && e.payload.case_id === 'c1')).toBe(false);
      firstCase.resolve();
      await rig.waitForEvent(runId, 'awaiting review', (e) => e.payload.state?.status === 'awaiting_review');

      expect(await rejectionOf(approve('a-stranger', 'eve@acme'))).toBe("not_a_reviewer: 'eve@acme' is not a reviewer of this run");
      expect(await rejectionOf(approve('', 'rev@acme'))).toBe('command_id is required');
      expect(await approve('a-1', 'rev@acme')).toBe('approved by rev@acme');
      expect(await handle.result()).toBe('published');

      expect(mostInFlight).toBeLessThanOrEqual(2);
      const view = await handle.query(evalStatusQuery);
      expect(view).toMatchObject({ status: 'published', total: 5, done: 5, counts: { ok: 3, failed: 1, ungraded: 1 }, score: 0.75, approved_by: 'rev@acme' });
      expect(view.cases).toMatchObject({
        c2: { status: 'failed', score: 0, error_type: 'agent_error' },
        c3: { status: 'ungraded', error_type: 'infra_error' },
        c4: { status: 'ok', attempts: 2 },
      });
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(events.map((e) => e.type)).toEqual(['run_started', ...Array(5).fill('case_finished'), 'status_changed', 'status_changed', 'run_finished']);
      expect(events.slice(-3).map((e) => [e.payload.state?.status, e.type === 'status_changed' ? (e.payload.reviewer ?? null) : null])).toEqual([
        ['awaiting_review', null],
        ['published', 'rev@acme'],
        ['published', null],
      ]);
      // A benchmark failure is a result, never retried; the hiccup was.
      expect(rig.callsOf('runCase').map((c) => (c.input as CaseRequest).case_id).sort()).toEqual(['c1', 'c2', 'c3', 'c4', 'c4', 'c5']);
    });
  });

  it('a cancel reaches every running case within one heartbeat timeout, and no further case starts', async () => {
    const heartbeatS = 2;
    const cancelledAt = new Map<string, number>();
    const rig = env.rig({
      gpuEval: {
        runCase: async (request: CaseRequest) => {
          try {
            await holdActivity(new Promise(() => undefined));
          } catch (err) {
            if (err instanceof CancelledFailure) cancelledAt.set(request.case_id, Date.now());
            throw err;
          }
          throw new Error('a held case only ends by being cancelled');
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('cancel');
      const handle = await rig.startEval('cancel', { case_ids: ['c1', 'c2', 'c3', 'c4'], parallelism: 2, case_heartbeat_s: heartbeatS });
      await rig.waitForCall('runCase', 'two cases in flight', () => rig.callsOf('runCase').length === 2);
      const signalledAt = Date.now();
      await handle.signal(cancelEvalSignal, { command_id: 'cancel-1' });

      expect(await handle.result()).toBe('cancelled');
      await waitFor('both cases to see the cancel', () => cancelledAt.size === 2, heartbeatS * 1_000 * 3, 20);
      for (const at of cancelledAt.values()) expect(at - signalledAt).toBeLessThan(heartbeatS * 1_000);
      expect(rig.callsOf('runCase').map((c) => (c.input as CaseRequest).case_id).sort()).toEqual(['c1', 'c2']);

      const view = await handle.query(evalStatusQuery);
      expect(view).toMatchObject({ status: 'cancelled', done: 0, processed_command_ids: ['cancel-1'] });
      expect(Object.values(view.cases).every((c) => c.status === 'pending')).toBe(true);
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(events.map((e) => [e.type, e.payload.state?.status])).toEqual([
        ['run_started', 'running'],
        ['status_changed', 'cancelling'],
        ['run_finished', 'cancelled'],
      ]);
    });
  });

  it('a case that finishes as the cancel arrives is counted, a finished benchmark failure too, and no further case starts', async () => {
    const lastTick = new Deferred();
    const effects: string[] = [];
    const rig = env.rig({
      gpuEval: {
        // Both cases are on their last tick when the cancel comes: they finish, record their effect and answer, never having looked for a cancel.
        runCase: async (request: CaseRequest) => {
          const context = Context.current();
          const beat = setInterval(() => context.heartbeat(), 50);
          try {
            await lastTick.promise;
          } finally {
            clearInterval(beat);
          }
          effects.push(request.key);
          if (request.case_id === 'c2') throw ApplicationFailure.nonRetryable('wrong answer', 'CaseFailed', { error_type: 'agent_error' });
          return { key: request.key, case_id: request.case_id, ok: true, score: 1, attempt: 1, duplicate: false };
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('cancel-race');
      const handle = await rig.startEval('cancel-race', { case_ids: ['c1', 'c2', 'c3', 'c4'], parallelism: 2, case_heartbeat_s: 2 });
      await rig.waitForCall('runCase', 'two cases in flight', () => rig.callsOf('runCase').length === 2);
      await handle.signal(cancelEvalSignal, { command_id: 'cancel-1' });
      // The run has taken the cancel (and told its in-flight cases) before they answer.
      await rig.waitForEvent(runId, 'the cancel taken', (e) => e.payload.state?.status === 'cancelling');
      lastTick.resolve();

      expect(await handle.result()).toBe('cancelled');
      const view = await handle.query(evalStatusQuery);
      expect(effects.sort()).toEqual(['acme/' + runId + ':c1', 'acme/' + runId + ':c2']);
      expect(view).toMatchObject({ status: 'cancelled', done: effects.length, counts: { ok: 1, failed: 1, ungraded: 0 } });
      expect(view.cases).toEqual({ c1: { status: 'ok', score: 1, attempts: 1 }, c2: { status: 'failed', score: 0, error_type: 'agent_error' }, c3: { status: 'pending' }, c4: { status: 'pending' } });
      expect(rig.callsOf('runCase').map((c) => (c.input as CaseRequest).case_id).sort()).toEqual(['c1', 'c2']);
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(events.map((e) => [e.type, e.payload.state?.status])).toEqual([
        ['run_started', 'running'],
        ['status_changed', 'cancelling'],
        ['case_finished', 'cancelling'],
        ['case_finished', 'cancelling'],
        ['run_finished', 'cancelled'],
      ]);
      expect(events.at(-1)?.payload.state).toMatchObject({ done: 2 });
    });
  });

  describe('its budget', () => {
    const shortfall = { scope: 'run', limit: 'tokens', max: 100, spent: 80, reserved: 0, needed: 50, left: 20 };
    /** A case fits while the eval's max_tokens is at least `fits`; otherwise the worker refuses it as the ledger would. */
    /** Heartbeats until `released`, not heeding a cancel: the case finishes whatever it is told. */
    const finishRegardless = async (released: Promise<unknown>) => {
      const context = Context.current();
      const beat = setInterval(() => context.heartbeat(), 50);
      try {
        await released;
      } finally {
        clearInterval(beat);
      }
    };
    const budgetedCase = (fits: number, hold?: Promise<unknown>) => async (request: CaseRequest) => {
      if (request.case_id === 'c1' && hold) await finishRegardless(hold);
      if ((request.budget?.max_tokens ?? 0) < fits && request.case_id !== 'c1') {
        throw ApplicationFailure.create({ message: 'budget exhausted', type: BUDGET_EXHAUSTED, nonRetryable: true, details: [shortfall] });
      }
      return { key: request.key, case_id: request.case_id, ok: true, score: 1, attempt: Context.current().info.attempt, duplicate: false, result: { input: 'i', target: ['t'], output: 'o', scores: [], usage: { prompt_tokens: 3, completion_tokens: 2, cost_usd: 0.001 }, duration_ms: 1 } };
    };

    it('a case that does not fit pauses the eval, no further case starts, and a raise lets the rest finish', async () => {
      const rig = env.rig({ gpuEval: { runCase: budgetedCase(1_000) } });
      await rig.run(async () => {
        const runId = rig.runId('budget');
        const handle = await rig.startEval('budget', { case_ids: ['c1', 'c2', 'c3', 'c4'], parallelism: 1, budget: { max_tokens: 100 } });
        await rig.waitForEvent(runId, 'the pause', (e) => e.type === 'budget_exhausted');
        const paused = await handle.query(evalStatusQuery);
        expect(paused).toMatchObject({ status: 'paused', reason: 'budget_exhausted', done: 1, budget: { max_tokens: 100 }, usage: { calls: 1, prompt_tokens: 3, completion_tokens: 2 } });
        expect(paused.cases).toMatchObject({ c1: { status: 'ok' }, c2: { status: 'pending' }, c3: { status: 'pending' } });
        expect(rig.callsOf('runCase').map((c) => (c.input as CaseRequest).case_id)).toEqual(['c1', 'c2']);
        const raise = (command_id: string, max_tokens: number) => handle.executeUpdate(raiseBudgetUpdate, { args: [{ command_id, max_tokens }] });
        expect(await rejectionOf(raise('r-low', 100))).toBe("max_tokens must be higher than the run's current 100");
        expect(await raise('r-1', 5_000)).toBe('budget raised');
        await rig.waitForEvent(runId, 'awaiting review', (e) => e.payload.state?.status === 'awaiting_review');
        const view = await handle.query(evalStatusQuery);
        expect(view).toMatchObject({ done: 4, budget: { max_tokens: 5_000 }, usage: { calls: 4, prompt_tokens: 12, completion_tokens: 8, cost_usd: 0.004 } });
        const events = rig.events(runId);
        expect(seqsOf(events)).toEqual(oneToN(events.length));
        expect(events.find((e) => e.type === 'budget_exhausted')?.payload).toMatchObject({ ...shortfall, step: 1, case_id: 'c2' });
        expect(events.filter((e) => e.type === 'budget_raised').map((e) => e.payload.previous)).toEqual([{ max_tokens: 100 }]);
        await handle.signal(cancelEvalSignal, { command_id: 'end' });
        expect(await handle.result()).toBe('cancelled');
      });
    });

    it("an agent-solver eval's cases spend under its budget: a refused call pauses the case's run and the eval, one raise reaches every case's run", async () => {
      // The ledger's answer as callModel gives it: refused while the limit is under 1,000 tokens.
      const asked: Pick<ModelCall, 'run_id' | 'budget_run_id' | 'budget'>[] = [];
      const rig = env.rig({
        cpu: {
          callModel: async (call) => {
            asked.push({ run_id: call.run_id, budget_run_id: call.budget_run_id, budget: call.budget });
            if ((call.budget?.max_tokens ?? 0) < 1_000) throw ApplicationFailure.create({ message: 'budget exhausted', type: BUDGET_EXHAUSTED, nonRetryable: true, details: [shortfall] });
            return { ...modelReply(call), usage: { model: 'm', prompt_tokens: 30, completion_tokens: 10, cost_usd: 0.0001, priced: true } };
          },
        },
        gpuEval: {
          loadAgentCase: async (request: CaseRequest) => ({ goal: `solve ${request.case_id}` }),
          scoreAgentCase: async (request: CaseRequest) => ({ key: request.key, case_id: request.case_id, ok: true, score: 1, attempt: 1, duplicate: false }),
        },
      });
      await rig.run(async () => {
        const runId = rig.runId('agent-budget');
        const handle = await rig.startEval('agent-budget', {
          case_ids: ['c1', 'c2'],
          parallelism: 2,
          budget: { max_tokens: 100 },
          spec: { dataset: { id: 'd1', name: 'agent', source: 'shipped' }, solver: { name: 'agent' }, scorers: [{ name: 'files' }], model: 'model-a' },
          agent: {
            max_steps: 2,
            policy: 'llm',
            tier: 'batch',
            lanes: { agentWorkflows: rig.lanes.agentWorkflows, cpuTools: rig.lanes.cpuTools, gpuTools: rig.lanes.gpuTools },
            steps_per_execution: 1_000,
            timeouts: { tool_start_to_close_s: 30, tool_heartbeat_s: 5, gpu_schedule_to_start_s: 30 },
            events_via: 'carried',
          },
        });
        const caseRuns = ['c1', 'c2'].map((c) => rig.client.workflow.getHandle<typeof AgentRun>(`${rig.org}/${runId}.${c}`));
        // Both cases' runs are refused and pause; the eval pauses once.
        for (const run of caseRuns) await waitFor('the case run to pause', async () => (await run.query(statusQuery).catch(() => undefined))?.status === 'paused', 10_000, 20);
        expect(await caseRuns[0].query(statusQuery)).toMatchObject({ status: 'paused', reason: 'budget_exhausted', budget: { max_tokens: 100 } });
        await waitFor('the eval to pause', async () => (await handle.query(evalStatusQuery)).status === 'paused', 10_000, 20);
        // A case's run is not raised on its own.
        expect(await rejectionOf(caseRuns[0].executeUpdate(raiseBudgetUpdate, { args: [{ command_id: 'alone', max_tokens: 5_000 }] }))).toBe(`this run spends under run ${runId}'s budget: raise that run's budget instead`);
        expect(await handle.executeUpdate(raiseBudgetUpdate, { args: [{ command_id: 'r-1', max_tokens: 5_000 }] })).toBe('budget raised');
        await rig.waitForEvent(runId, 'awaiting review', (e) => e.payload.state?.status === 'awaiting_review');
        for (const run of caseRuns) expect(await run.result()).toMatchObject({ status: 'done' });
        // Every call reserved under the eval's run id: refused under 100, then made under 5,000.
        expect(asked.every((a) => a.budget_run_id === runId)).toBe(true);
        expect(asked.filter((a) => a.budget?.max_tokens === 100).map((a) => a.run_id).sort()).toEqual([`${runId}.c1`, `${runId}.c2`]);
        expect(asked.filter((a) => a.budget?.max_tokens !== 100).every((a) => a.budget?.max_tokens === 5_000)).toBe(true);
        const events = rig.events(runId);
        expect(events.filter((e) => e.type === 'budget_exhausted').map((e) => e.payload.case_id)).toHaveLength(1);
        expect(events.filter((e) => e.type === 'status_changed').map((e) => e.payload.state?.status)).toEqual(['running', 'awaiting_review']);
        for (const c of ['c1', 'c2']) {
          const raised = rig.events(`${runId}.${c}`).filter((e) => e.type === 'budget_raised');
          expect(raised.map((e) => [e.payload.command_id, e.payload.previous])).toEqual([[`${runId}:budget:1`, { max_tokens: 100 }]]);
        }
        await handle.signal(cancelEvalSignal, { command_id: 'end' });
        expect(await handle.result()).toBe('cancelled');
      });
    });

    it('a cancel while paused still waits for the case in flight and counts it', async () => {
      const held = new Deferred();
      const rig = env.rig({ gpuEval: { runCase: budgetedCase(1_000, held.promise) } });
      await rig.run(async () => {
        const runId = rig.runId('budget-cancel');
        const handle = await rig.startEval('budget-cancel', { case_ids: ['c1', 'c2', 'c3'], parallelism: 2, budget: { max_tokens: 100 } });
        // c1 is held in flight; c2 is refused and the eval pauses.
        await rig.waitForEvent(runId, 'the pause', (e) => e.type === 'budget_exhausted');
        await handle.signal(cancelEvalSignal, { command_id: 'cancel-paused' });
        // The case in flight finishes though the cancel reached it: the eval waits for it and counts it.
        await waitFor('the cancel to be in', async () => (await handle.query(evalStatusQuery)).status === 'cancelling', 10_000, 20);
        held.resolve();
        expect(await handle.result()).toBe('cancelled');
        const view = await handle.query(evalStatusQuery);
        expect(view.cases).toMatchObject({ c1: { status: 'ok' }, c2: { status: 'pending' }, c3: { status: 'pending' } });
        expect(rig.events(runId).filter((e) => e.type === 'case_finished').map((e) => e.payload.case_id)).toEqual(['c1']);
      });
    });
  });
});
