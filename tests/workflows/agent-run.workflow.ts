import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type { RunEvent, RunEventOf } from '@agentrun/contracts';
import { AGENT_STATUS_KEY, cancelRunSignal, changeGoalUpdate, CURRENT_STEP_KEY, pauseSignal, raiseBudgetUpdate, resumeSignal, statusQuery, type ModelCall, type ToolCall } from '@agentrun/workflows';
import { Deferred, failureOf, holdActivity, modelReply, oneToN, rejectionOf, seqsOf, toolResult, WorkflowTestEnv } from '../support/workflow-env';

/** The ledger's refusal as the orchestrator's callModel reports it: a call needing 1,000 tokens against the run's limit. */
function budgetRefusal(call: ModelCall): ApplicationFailure {
  const max = call.budget?.max_tokens ?? 0;
  const details = { scope: 'run', limit: 'tokens', max, spent: 0, reserved: 0, needed: 1_000, left: max };
  return ApplicationFailure.create({ message: 'budget exhausted', type: 'BudgetExhausted', nonRetryable: true, details: [details] });
}

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await WorkflowTestEnv.start();
});
afterAll(async () => {
  await env?.stop();
});

const statusOf = (e: RunEvent): unknown => e.payload.state?.status;
const stepsCompleted = (events: RunEvent[]): unknown[] => events.filter((e) => e.type === 'step_completed').map((e) => e.payload.step);
type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const eventId = (e: HistoryEvent | undefined): number => Number(e?.eventId ?? NaN);

describe('AgentRun', () => {
  it('runs model, CPU tool, GPU tool and a ResearchAgent child, publishing seqs 1..N', async () => {
    const rig = env.rig();
    await rig.run(async () => {
      const handle = await rig.startAgent('happy', { max_steps: 4 });
      const result = await handle.result();
      expect(result).toMatchObject({ status: 'done', steps: 4, attempts: 0, duplicates_suppressed: 0 });
      const events = rig.events(rig.runId('happy'));
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(result.last_seq).toBe(events.length);
      expect(events.map((e) => e.type)).toEqual(['run_started', 'step_completed', 'step_completed', 'step_completed', 'child_started', 'step_completed', 'run_finished']);
      expect(events.filter((e) => e.type === 'step_completed').map((e) => [e.payload.step, e.payload.kind, e.payload.tool ?? null])).toEqual([
        [0, 'llm', null],
        [1, 'tool', 'search'],
        [2, 'tool', 'embed'],
        [3, 'research', null],
      ]);
      expect(statusOf(events.at(-1)!)).toBe('done');
      // Each call on its lane; the workspace prepared once, before any step.
      expect(rig.calls.map((c) => [c.name, c.lane])).toEqual([
        ['prepareWorkspace', rig.lanes.cpuTools],
        ['callModel', rig.lanes.cpuTools],
        ['runTool', rig.lanes.cpuTools],
        ['runTool', rig.lanes.gpuTools],
        ['callModel', rig.lanes.cpuTools],
      ]);
      // The child is a workflow of its own, keyed under its parent; its answer is the step's output.
      const workflowId = `${rig.org}/${rig.runId('happy')}`;
      const childId = `${workflowId}/research/3`;
      const started = events.find((e) => e.type === 'child_started')!;
      expect(started.payload).toMatchObject({ step: 3, child_workflow_id: childId });
      const asked = rig.callsOf('callModel')[1].input as ModelCall;
      expect(asked.key.startsWith(`${childId}:0:`)).toBe(true);
      expect(asked.messages.at(-1)?.content).toBe(`research: ${started.payload.question as string}`);
      expect(events.find((e): e is RunEventOf<'step_completed'> => e.type === 'step_completed' && e.payload.step === 3)?.payload.output).toBe('model reply at step 0');
      const child = await rig.client.workflow.getHandle(childId).describe();
      expect(child.type).toBe('ResearchAgent');
      expect(child.status.name).toBe('COMPLETED');
      expect(child.parentExecution?.workflowId).toBe(workflowId);
      // The attributes the run upserts are registered on the test server, as the stack registers them.
      const attributes = (await handle.describe()).typedSearchAttributes;
      expect([attributes.get(AGENT_STATUS_KEY), attributes.get(CURRENT_STEP_KEY)]).toEqual(['done', 4]);
      // Every patch this run took (its GPU call and its research child carrying events, CurrentStep every
      // 20 steps) is under one marker, the baseline's, asked in the first task: one marker and one
      // `TemporalChangeVersion` upsert, not one of each per patch.
      const history = (await handle.fetchHistory()).events ?? [];
      const patches = history.flatMap((e) => {
        const marker = e.markerRecordedEventAttributes;
        if (marker?.markerName !== 'core_patch') return [];
        const data = marker.details?.['patch-data']?.payloads?.[0]?.data;
        return [{ id: (JSON.parse(Buffer.from(data ?? []).toString()) as { id: string }).id, task: Number(marker.workflowTaskCompletedEventId) }];
      });
      const firstTask = eventId(history.find((e) => e.workflowTaskCompletedEventAttributes));
      expect(patches).toEqual([{ id: 'agent-run-baseline-2026-12', task: firstTask }]);
      const upserted = history.flatMap((e) => Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}).sort().join('+') || []);
      expect(upserted).toEqual(['TemporalChangeVersion', 'AgentStatus+CurrentStep', 'AgentStatus+CurrentStep']);
    });
  });

  it("on the workflow-task sink (runs started so), publishes a task's events before the task completes, with no activity or history event of their own", async () => {
    const held = new Deferred();
    env.publishHold = held.promise;
    const rig = env.rig();
    try {
      await rig.run(async () => {
        const runId = rig.runId('held');
        const handle = await rig.startAgent('held', { max_steps: 3, events_via: undefined });
        await rig.waitForEvent(runId, 'run_started handed to the sink', (e) => e.type === 'run_started');
        // The first task's events wait for their ack, and so does the task: nothing it decided is in
        // the history yet, and the workspace is not being prepared.
        const before = (await handle.fetchHistory()).events ?? [];
        expect(before.filter((e) => e.workflowTaskStartedEventAttributes)).toHaveLength(1);
        expect(before.filter((e) => e.workflowTaskCompletedEventAttributes)).toHaveLength(0);
        expect(rig.calls).toEqual([]);
        held.resolve();
        env.publishHold = undefined;
        expect(await handle.result()).toMatchObject({ status: 'done', steps: 3 });
        const events = rig.events(runId);
        expect(seqsOf(events)).toEqual(oneToN(events.length));
        expect(rig.everyPublished(runId)).toHaveLength(events.length);
        // The whole history: no publishing activity, and no step upserts `CurrentStep` (status changes do).
        const history = (await handle.fetchHistory()).events ?? [];
        const scheduled = history.map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name).filter(Boolean);
        expect(scheduled).toEqual(['prepareWorkspace', 'callModel', 'runTool', 'runTool']);
        // Upserts: the SDK's `TemporalChangeVersion` for the one marker this behaviour is under (the baseline's), then `running` and `done`.
        const upserted = history.flatMap((e) => Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}).sort().join('+') || []);
        expect(upserted).toEqual(['TemporalChangeVersion', 'AgentStatus+CurrentStep', 'AgentStatus+CurrentStep']);
      });
    } finally {
      held.resolve();
      env.publishHold = undefined;
    }
  });

  it('a run started with events_via activity publishes every batch by activity, and upserts CurrentStep only with its status under its own patch', async () => {
    const rig = env.rig();
    await rig.run(async () => {
      const runId = rig.runId('by-activity');
      const handle = await rig.startAgent('by-activity', { max_steps: 3, events_via: 'activity' });
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 3 });
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(rig.carriedCalls).toBe(0);
      const history = (await handle.fetchHistory()).events ?? [];
      // Every event went out in an activity's input: in the history, so only what completed tasks emitted.
      const published = history.flatMap((e) => (e.activityTaskScheduledEventAttributes?.activityType?.name === 'publishRunEvents' ? [e.activityTaskScheduledEventAttributes] : []));
      expect(published.length).toBeGreaterThanOrEqual(1);
      // One marker, the baseline's, which `CurrentStep` every 20 steps is under; no step of three upserts it.
      const markers = history.flatMap((e) => (e.markerRecordedEventAttributes ? [e.markerRecordedEventAttributes.markerName] : []));
      expect(markers).toEqual(['core_patch']);
      const upserted = history.flatMap((e) => Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}).sort().join('+') || []);
      expect(upserted).toEqual(['TemporalChangeVersion', 'AgentStatus+CurrentStep', 'AgentStatus+CurrentStep']);
    });
  });

  /** Runs a 4-step agent to `done` and checks its events are seqs 1..n, each seq one event however often published. */
  async function fourStepsInOrder(rig: ReturnType<typeof env.rig>, name: string) {
    const runId = rig.runId(name);
    const handle = await rig.startAgent(name, { max_steps: 4 });
    expect(await handle.result()).toMatchObject({ status: 'done', steps: 4 });
    const events = rig.events(runId);
    expect(seqsOf(events)).toEqual(oneToN(events.length));
    // Every copy of a seq is the same event.
    expect(new Set(rig.everyPublished(runId).map((e) => `${e.seq}:${e.type}`)).size).toBe(events.length);
    return { handle, events };
  }

  it('a carried run (the default) sends its events with its CPU- and GPU-lane calls and its research child, and by activity only what none of them carries', async () => {
    const rig = env.rig();
    await rig.run(async () => {
      const { handle } = await fourStepsInOrder(rig, 'carried');
      const history = (await handle.fetchHistory()).events ?? [];
      const children = history.flatMap((e) => e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId ?? []);
      expect(children).toHaveLength(1);
      const childHistory = (await rig.client.workflow.getHandle(children[0]).fetchHistory()).events ?? [];
      const scheduledIn = (events: typeof history, where: string) =>
        events.flatMap((e) => {
          const a = e.activityTaskScheduledEventAttributes;
          return a ? [{ where, name: a.activityType?.name, queue: a.taskQueue?.name, args: a.input?.payloads?.length ?? 0 }] : [];
        });
      const scheduled = scheduledIn(history, 'run');
      // The calls that carried events have them as a second argument, in the history: the GPU step's
      // call among them, and the research child's model call (the events came in the child's input).
      const carrying = [...scheduled, ...scheduledIn(childHistory, 'child')].filter((a) => a.args === 2);
      expect(rig.carriedCalls).toBeGreaterThanOrEqual(3);
      expect(carrying).toHaveLength(rig.carriedCalls);
      expect(carrying.every((a) => a.queue === rig.lanes.cpuTools || a.queue === rig.lanes.gpuTools)).toBe(true);
      expect(carrying.filter((a) => a.queue === rig.lanes.gpuTools).length).toBeGreaterThanOrEqual(1);
      expect(carrying.filter((a) => a.where === 'child')).toEqual([{ where: 'child', name: 'callModel', queue: rig.lanes.cpuTools, args: 2 }]);
      // Each carrier was reported to the worker's stalled-carrier watch when scheduled, and again when it settled.
      const watch = rig.carrierWatch();
      const through = (call: string) => watch.filter((w) => w.call === call).map((w) => w.through).sort((a, b) => a - b);
      expect(through('carrying')).toHaveLength(rig.carriedCalls);
      expect(through('landed')).toEqual(through('carrying'));
      // Fewer publishing activities than the same run publishing every batch by activity (the first
      // events and the end still need one each).
      const publishing = scheduled.filter((a) => a.name === 'publishRunEvents').length;
      expect(publishing).toBeGreaterThanOrEqual(1);
      const byActivity = await rig.startAgent('carried-baseline', { max_steps: 4, events_via: 'activity' });
      await byActivity.result();
      const baseline = ((await byActivity.fetchHistory()).events ?? []).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'publishRunEvents').length;
      expect(publishing).toBeLessThan(baseline);
      console.log(`4 steps: publishRunEvents ${publishing} carried, ${baseline} by activity; carried calls ${rig.carriedCalls}`);
    });
  });

  it("a carried run whose workers cannot publish still gets every event out, by the publishing activity", async () => {
    const rig = env.rig({ carrier: 'cannot' });
    await rig.run(async () => {
      const { handle, events } = await fourStepsInOrder(rig, 'carrier-down');
      expect(events.at(-1)).toMatchObject({ type: 'run_finished' });
      expect(rig.carriedCalls).toBeGreaterThanOrEqual(1);
      // Nothing the carriers held was lost: all of it went by activity.
      const history = (await handle.fetchHistory()).events ?? [];
      expect(history.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'publishRunEvents').length).toBeGreaterThanOrEqual(1);
    });
  });

  it('pauses mid-step: the step in flight completes, and no step starts until resume', async () => {
    const release = new Deferred();
    const rig = env.rig({
      cpu: {
        runTool: async (call) => {
          await holdActivity(release.promise);
          return toolResult(call, 'cpu');
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('pause');
      const handle = await rig.startAgent('pause', { max_steps: 4 });
      await rig.waitForCall('runTool', 'the CPU tool of step 1 to start');
      await handle.signal(pauseSignal, { command_id: 'pause-1' });
      await rig.waitForEvent(runId, 'the pause', (e) => e.type === 'status_changed' && statusOf(e) === 'paused');
      expect(await handle.query(statusQuery)).toMatchObject({ status: 'paused', step: 1 });

      release.resolve();
      await rig.waitForEvent(runId, 'step 1 to complete while paused', (e) => e.type === 'step_completed' && e.payload.step === 1);
      expect(await handle.query(statusQuery)).toMatchObject({ status: 'paused', step: 2 });

      await handle.signal(resumeSignal, { command_id: 'resume-1' });
      // The same pause again (a redelivery) is a no-op: the run does not pause a second time.
      await handle.signal(pauseSignal, { command_id: 'pause-1' });
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 4 });

      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(events.filter((e) => e.type === 'status_changed').map((e) => [statusOf(e), e.payload.command_id])).toEqual([
        ['paused', 'pause-1'],
        ['running', 'resume-1'],
      ]);
      expect(statusOf(events.find((e) => e.type === 'step_completed' && e.payload.step === 1)!)).toBe('paused');
      expect((await handle.query(statusQuery)).processed_command_ids).toEqual(['pause-1', 'resume-1']);

      // Nothing was scheduled while paused: the GPU step of step 2 comes after the resume in the history.
      const history = (await handle.fetchHistory()).events ?? [];
      const resumed = history.find((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'resume');
      const gpuScheduled = history.find((e) => e.activityTaskScheduledEventAttributes?.taskQueue?.name === rig.lanes.gpuTools);
      expect(eventId(gpuScheduled)).toBeGreaterThan(eventId(resumed));
    });
  });

  it('a cancel command mid-step lets the step finish, starts nothing more and refuses goal changes', async () => {
    const release = new Deferred();
    const rig = env.rig({
      gpu: {
        runTool: async (call) => {
          await holdActivity(release.promise);
          return toolResult(call, 'gpu');
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('cancel-step');
      const handle = await rig.startAgent('cancel-step', { max_steps: 8 });
      await rig.waitForCall('runTool', 'the GPU tool of step 2 to start', (c) => c.lane === rig.lanes.gpuTools);
      await handle.signal(cancelRunSignal, { command_id: 'cancel-1' });
      await rig.waitForEvent(runId, 'cancelling', (e) => statusOf(e) === 'cancelling');
      expect(await rejectionOf(handle.executeUpdate(changeGoalUpdate, { args: [{ command_id: 'goal-late', goal: 'something else' }] }))).toBe(
        'the run is cancelling; its goal can no longer change',
      );

      release.resolve();
      expect(await handle.result()).toMatchObject({ status: 'cancelled', steps: 3 });
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(stepsCompleted(events)).toEqual([0, 1, 2]);
      expect(events.at(-1)).toMatchObject({ type: 'run_finished', payload: { state: { status: 'cancelled' } } });
      // The GPU step finished and gave its lease back itself: nothing to compensate, no research started.
      expect(events.some((e) => e.type === 'compensated' || e.type === 'child_started')).toBe(false);
      expect(rig.callsOf('compensate')).toEqual([]);
    });
  });

  it('a Temporal cancel mid-GPU-step cancels the tool and releases its lease through the saga', async () => {
    const cancelled = new Deferred<unknown>();
    const rig = env.rig({
      gpu: {
        runTool: async () => {
          try {
            await holdActivity(new Promise(() => undefined));
          } catch (err) {
            cancelled.resolve(err);
            throw err;
          }
          throw new Error('a held tool only ends by being cancelled');
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('temporal-cancel');
      const handle = await rig.startAgent('temporal-cancel', { max_steps: 8 });
      const gpuCall = await rig.waitForCall('runTool', 'the GPU tool of step 2 to start', (c) => c.lane === rig.lanes.gpuTools);
      await handle.cancel();

      expect(await failureOf(handle.result())).toBeInstanceOf(CancelledFailure);
      expect(await cancelled.promise).toBeInstanceOf(CancelledFailure);
      const lease = `release_gpu:${(gpuCall.input as ToolCall).key}`;
      expect(rig.callsOf('compensate').map((c) => c.input)).toEqual([{ org: rig.org, run_id: runId, name: lease }]);
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      // The cancel can reach the server while the last task runs: the task runs again and hands its
      // events over again. A copy is the same event (same seq, same type), published after its original.
      expect(new Set(rig.everyPublished(runId).map((e) => `${e.seq}:${e.type}`)).size).toBe(events.length);
      expect(stepsCompleted(events)).toEqual([0, 1]);
      expect(events.slice(-2).map((e) => [e.type, e.type === 'compensated' ? e.payload.name : null, statusOf(e)])).toEqual([
        ['compensated', lease, 'running'],
        ['run_finished', null, 'cancelled'],
      ]);
    });
  });

  it('change-goal: the validator refuses with its message, an accepted goal steers later steps, a repeat is ignored', async () => {
    const release = new Deferred();
    const rig = env.rig({
      cpu: {
        runTool: async (call) => {
          await holdActivity(release.promise);
          return toolResult(call, 'cpu');
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('goal');
      const handle = await rig.startAgent('goal', { max_steps: 4, goal: 'first goal' });
      await rig.waitForCall('runTool', 'the CPU tool of step 1 to start');
      const change = (command_id: string, goal: string) => handle.executeUpdate(changeGoalUpdate, { args: [{ command_id, goal }] });

      expect(await rejectionOf(change('g-empty', ''))).toBe('goal must not be empty');
      expect(await rejectionOf(change('g-blank', '   '))).toBe('goal must not be empty');
      expect(await rejectionOf(change('g-long', 'x'.repeat(8_001)))).toBe('goal must be at most 8000 characters');
      expect(await rejectionOf(change('', 'a goal'))).toBe('command_id is required');
      // Characters are code points: 500 emoji (1,000 UTF-16 units) are 500 characters.
      const emoji = '\u{1F600}'.repeat(500);
      expect(await change('g-emoji', emoji)).toBe(`goal changed from 'first goal' to '${emoji}'`);
      expect(await change('g-final', 'second goal')).toBe(`goal changed from '${emoji}' to 'second goal'`);
      expect(await change('g-final', 'third goal')).toBe('ignored: command g-final already applied');
      expect(await handle.query(statusQuery)).toMatchObject({ goal: 'second goal', step: 1 });

      release.resolve();
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 4 });
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      expect(events.filter((e) => e.type === 'goal_changed').map((e) => [e.payload.command_id, e.payload.previous_goal, e.payload.state?.goal])).toEqual([
        ['g-emoji', 'first goal', emoji],
        ['g-final', emoji, 'second goal'],
      ]);
      // Later steps work toward the new goal.
      expect(events.find((e) => e.type === 'child_started')?.payload.question).toBe('what is still missing for: second goal');
      // Refused updates never reach the history; accepted ones (the ignored repeat too) do.
      const history = (await handle.fetchHistory()).events ?? [];
      const accepted = history.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).map((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.meta?.updateId);
      expect(accepted).toHaveLength(3);
      expect(history.some((e) => e.workflowExecutionUpdateRejectedEventAttributes)).toBe(false);
    });
  });

  it('a model call that does not fit the budget pauses the run (nothing fails); a raise the validator accepts lets it finish', async () => {
    // The ledger's answer as the orchestrator's callModel gives it: refused while the run's limit is under 1,000 tokens.
    const asked: (number | undefined)[] = [];
    const rig = env.rig({
      cpu: {
        callModel: async (call) => {
          asked.push(call.budget?.max_tokens);
          if ((call.budget?.max_tokens ?? 0) < 1_000) throw budgetRefusal(call);
          return { ...modelReply(call), usage: { model: 'm', prompt_tokens: 30, completion_tokens: 10, cost_usd: 0.0001, priced: true } };
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('budget');
      const handle = await rig.startAgent('budget', { max_steps: 3, budget: { max_tokens: 500 } });
      await rig.waitForEvent(runId, 'the run paused on its budget', (e) => e.type === 'budget_exhausted');
      expect(await handle.query(statusQuery)).toMatchObject({ status: 'paused', reason: 'budget_exhausted', step: 0, budget: { max_tokens: 500 } });
      const raise = (command_id: string, limits: { max_tokens?: number; max_cost_usd?: number }) => handle.executeUpdate(raiseBudgetUpdate, { args: [{ command_id, ...limits }] });
      expect(await rejectionOf(raise('b-low', { max_tokens: 500 }))).toBe("max_tokens must be higher than the run's current 500");
      expect(await rejectionOf(raise('b-none', {}))).toBe('give max_tokens, max_cost_usd or both');
      expect(await rejectionOf(raise('b-neg', { max_cost_usd: -1 }))).toBe('max_cost_usd must be a positive number');
      expect(await raise('b-up', { max_tokens: 5_000 })).toBe('budget raised to {"max_tokens":5000}; the run goes on');
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 3 });
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      const exhausted = events.filter((e) => e.type === 'budget_exhausted');
      expect(exhausted.map((e) => [e.payload.step, e.payload.scope, e.payload.max, e.payload.state?.status, e.payload.state?.reason])).toEqual([[0, 'run', 500, 'paused', 'budget_exhausted']]);
      expect(events.filter((e) => e.type === 'budget_raised').map((e) => [e.payload.previous, e.payload.state?.status, e.payload.state?.budget])).toEqual([[{ max_tokens: 500 }, 'running', { max_tokens: 5_000 }]]);
      // The refused call was made again with the new limit, and only what ran is counted.
      expect(asked[0]).toBe(500);
      expect(asked.slice(1).every((m) => m === 5_000)).toBe(true);
      const llmSteps = events.filter((e) => e.type === 'step_completed' && e.payload.kind === 'llm').length;
      expect(events.at(-1)?.payload.state).toMatchObject({ status: 'done', usage: { calls: llmSteps, prompt_tokens: 30 * llmSteps, completion_tokens: 10 * llmSteps } });
    });
  });

  it('a call refused under limits raised while it was out is made again at once, not paused on', async () => {
    const inFlight = new Deferred();
    const release = new Deferred();
    const asked: (number | undefined)[] = [];
    const rig = env.rig({
      cpu: {
        callModel: async (call) => {
          asked.push(call.budget?.max_tokens);
          if ((call.budget?.max_tokens ?? 0) < 1_000) {
            // The first call is out when the raise arrives; the ledger refuses it under the old limit.
            inFlight.resolve();
            await holdActivity(release.promise);
            throw budgetRefusal(call);
          }
          return modelReply(call);
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('raise-in-flight');
      const handle = await rig.startAgent('raise-in-flight', { max_steps: 2, budget: { max_tokens: 500 } });
      await inFlight.promise;
      expect(await handle.executeUpdate(raiseBudgetUpdate, { args: [{ command_id: 'up', max_tokens: 5_000 }] })).toBe('budget raised to {"max_tokens":5000}');
      release.resolve();
      expect(await handle.result()).toMatchObject({ status: 'done', steps: 2 });
      expect(asked.slice(0, 2)).toEqual([500, 5_000]);
      expect(rig.events(runId).some((e) => e.type === 'budget_exhausted')).toBe(false);
    });
  });

  it('a GPU lane nobody serves fails the run with lane_stalled after its schedule-to-start timeout', async () => {
    const rig = env.rig({ gpu: 'unserved' });
    await rig.run(async () => {
      const runId = rig.runId('stalled');
      const handle = await rig.startAgent('stalled', { max_steps: 8, timeouts: { tool_start_to_close_s: 30, tool_heartbeat_s: 5, gpu_schedule_to_start_s: 1 } });
      const failure = await failureOf(handle.result());
      expect(failure).toBeInstanceOf(ApplicationFailure);
      expect((failure as ApplicationFailure).type).toBe('lane_stalled');
      expect(failure?.message).toBe(`lane stalled: no worker took 'embed' from task queue '${rig.lanes.gpuTools}' in time`);
      const events = rig.events(runId);
      expect(seqsOf(events)).toEqual(oneToN(events.length));
      // The cancel can reach the server while the last task runs: the task runs again and hands its
      // events over again. A copy is the same event (same seq, same type), published after its original.
      expect(new Set(rig.everyPublished(runId).map((e) => `${e.seq}:${e.type}`)).size).toBe(events.length);
      expect(stepsCompleted(events)).toEqual([0, 1]);
      expect(events.at(-1)).toMatchObject({ type: 'run_finished', payload: { state: { status: 'failed', reason: 'lane_stalled', message: failure?.message } } });
    });
  });

  it('a tool that fails once is retried and counted; bad arguments fail the run at once', async () => {
    const rig = env.rig({
      cpu: {
        runTool: async (call) => {
          const { attempt } = Context.current().info;
          if (call.args.step === 1 && attempt === 1) throw new Error('transient: connection reset');
          if (call.args.step === 5) throw ApplicationFailure.nonRetryable(`no such file: ${call.args.query}`, 'BadArguments');
          return toolResult(call, 'cpu', attempt);
        },
      },
    });
    await rig.run(async () => {
      const runId = rig.runId('flaky');
      const handle = await rig.startAgent('flaky', { max_steps: 8 });
      const failure = await failureOf(handle.result());
      expect((failure as ApplicationFailure).type).toBe('activity_failed');
      expect(failure?.message).toBe('no such file: find the answer');
      const events = rig.events(runId);
      expect(events.find((e): e is RunEventOf<'step_completed'> => e.type === 'step_completed' && e.payload.step === 1)?.payload.attempt).toBe(2);
      expect(rig.callsOf('runTool').filter((c) => (c.input as ToolCall).args.step === 5)).toHaveLength(1);
      expect(events.at(-1)).toMatchObject({ type: 'run_finished', payload: { state: { status: 'failed', reason: 'activity_failed' } } });
      expect((await handle.query(statusQuery)).attempts).toBe(1);
    });
  });
});
