import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  ContinueAsNew,
  continueAsNew,
  executeChild,
  isCancellation,
  proxyActivities,
  setHandler,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { isTerminal, type AgentRunState, type AgentStatus, type RunEventType } from '@agentrun/contracts';
import type {
  AgentActivities,
  AgentCarry,
  AgentRunInput,
  AgentRunResult,
  ForkState,
  ModelCall,
  ToolCall,
  ToolTimeouts,
  ToolResult,
} from './agent-run.types';
import { applyReply, applyToolResult, cancelPending, LLM_TOOL_LANES, startConversation, trimConversation, type Conversation } from './conversation';
import { ResearchAgent } from './research-agent.workflow';
import { openSnapshotSeries, type SnapshotSeries } from './snapshot-series';
import { openOutbox } from './outbox';
import { FOREVER, MODEL_RETRY, TOOL_RETRY } from './retry-policies';
import { cancelRunSignal, changeGoalUpdate, injectContextSignal, pauseSignal, resumeSignal, statusQuery } from './definitions';
import { digest } from './digest';
import { AGENT_STATUS_KEY, CURRENT_STEP_KEY } from './search-attributes';

export type Step =
  | { kind: 'llm'; prompt: string }
  | { kind: 'tool'; tool: string; lane: 'cpu' | 'gpu'; args: Record<string, string | number>; call_id?: string }
  | { kind: 'research'; question: string }
  | { kind: 'finish' };

export interface PlanState {
  step: number;
  max_steps: number;
  goal: string;
  context: string;
  research_every: number;
}

/**
 * The next step, as a pure function of state: it never calls a model, so replay always agrees.
 * Four phases per cycle: think (model), a CPU tool, a GPU tool, then research (a sub-agent, every
 * `research_every` cycles) or reflect (model).
 */
export function plan(state: PlanState): Step {
  if (state.step >= state.max_steps) return { kind: 'finish' };
  switch (state.step % 4) {
    case 0:
      return { kind: 'llm', prompt: `step ${state.step}: plan the next move toward: ${state.goal}` };
    case 1:
      return { kind: 'tool', tool: 'search', lane: 'cpu', args: { query: state.goal, step: state.step } };
    case 2:
      return { kind: 'tool', tool: 'embed', lane: 'gpu', args: { text: state.context.slice(-400) || state.goal, step: state.step } };
    default:
      return Math.floor(state.step / 4) % state.research_every === 0
        ? { kind: 'research', question: `what is still missing for: ${state.goal}` }
        : { kind: 'llm', prompt: `step ${state.step}: reflect on: ${state.context.slice(-200)}` };
  }
}

/**
 * Under the `llm` policy the model decides: run the tool calls it asked for, one per step, then ask
 * it again with their results; finish when it answers. Still a pure function of state.
 */
export function planLlm(state: { step: number; max_steps: number; conversation: Conversation }): Step {
  if (state.step >= state.max_steps) return { kind: 'finish' };
  const [call] = state.conversation.pending;
  if (call) return { kind: 'tool', tool: call.name, lane: LLM_TOOL_LANES[call.name], args: call.args, call_id: call.id };
  if (state.conversation.answer !== undefined) return { kind: 'finish' };
  return { kind: 'llm', prompt: '' };
}

export const DEFAULT_RESEARCH_EVERY = 4;
/** Temporal's hard limits are 50k events / 50 MB; an execution hands over long before. */
export const DEFAULT_HISTORY_BUDGET = { events: 2_000, bytes: 5 * 1024 * 1024 };
const MAX_CHILDREN_SHOWN = 50;
/** The reference's course values were 30 min / 30 s / 5 min; these suit tools that take seconds. */
export const DEFAULT_TIMEOUTS: ToolTimeouts = { tool_start_to_close_s: 60, tool_heartbeat_s: 10, gpu_schedule_to_start_s: 120 };

const PRIORITY_FOR_TIER = { enterprise: 1, team: 3, batch: 5 } as const;

export async function AgentRun(input: AgentRunInput): Promise<AgentRunResult> {
  const info = workflowInfo();
  const carry: AgentCarry = input.carry ?? {
    step: 0,
    seq: 0,
    goal: input.goal,
    context: '',
    attempts: 0,
    duplicates_suppressed: 0,
    processed_command_ids: [],
    status: 'queued',
    children: [],
  };
  let { step, goal, context, attempts, status } = carry;
  let duplicatesSuppressed = carry.duplicates_suppressed;
  const processed = new Set(carry.processed_command_ids);
  let executionStartedAtStep = step;
  let paused = status === 'paused';
  let cancelRequested = false;
  let failure: { reason: string; message: string } | undefined;
  const children = [...(carry.children ?? [])];
  let conversation: Conversation = carry.conversation ?? startConversation(goal);
  /** Saga steps to undo, in order taken, if the run is cancelled while holding them. */
  const compensations: string[] = [];
  const researchEvery = input.research_every ?? DEFAULT_RESEARCH_EVERY;
  const budget = input.history_budget ?? DEFAULT_HISTORY_BUDGET;
  const timeouts = input.timeouts ?? DEFAULT_TIMEOUTS;
  /** A fork's parent keys recorded before the fork point: those calls are answered from the ledger, never made again. */
  let reusable = new Set(carry.reusable_keys ?? []);
  const reuseKeyFor = (key: string): string | undefined => {
    if (!input.fork || reusable.size === 0) return undefined;
    const parentKey = input.fork.from_workflow_id + key.slice(info.workflowId.length);
    return reusable.has(parentKey) ? parentKey : undefined;
  };

  const cpu = proxyActivities<AgentActivities>({
    taskQueue: input.lanes.cpuTools,
    startToCloseTimeout: `${timeouts.tool_start_to_close_s}s`,
    heartbeatTimeout: `${timeouts.tool_heartbeat_s}s`,
    retry: TOOL_RETRY,
  });
  const gpu = proxyActivities<AgentActivities>({
    taskQueue: input.lanes.gpuTools,
    // A lane nobody serves fails the run clearly instead of waiting forever.
    scheduleToStartTimeout: `${timeouts.gpu_schedule_to_start_s}s`,
    startToCloseTimeout: `${timeouts.tool_start_to_close_s}s`,
    heartbeatTimeout: `${timeouts.tool_heartbeat_s}s`,
    retry: TOOL_RETRY,
    priority: { priorityKey: PRIORITY_FOR_TIER[input.tier], fairnessKey: input.org, fairnessWeight: 1 },
  });
  const model = proxyActivities<AgentActivities>({
    taskQueue: input.lanes.cpuTools,
    scheduleToCloseTimeout: '2m',
    startToCloseTimeout: '30s',
    retry: MODEL_RETRY,
  });
  // A restore streams a whole workspace (up to SNAPSHOT_RESTORE_MAX_BYTES): a longer bound, kept alive by heartbeats.
  const restorer = proxyActivities<AgentActivities>({
    taskQueue: input.lanes.cpuTools,
    startToCloseTimeout: '30m',
    heartbeatTimeout: `${Math.max(timeouts.tool_heartbeat_s, 10)}s`,
    retry: { ...TOOL_RETRY, nonRetryableErrorTypes: ['BadArguments', 'SnapshotUnusable'] },
  });
  const saga = proxyActivities<AgentActivities>({ taskQueue: input.lanes.cpuTools, startToCloseTimeout: '30s', retry: FOREVER });
  const state = (): AgentRunState => ({
    status,
    goal,
    step,
    max_steps: input.max_steps,
    policy: input.policy,
    tier: input.tier,
    ...(input.owner ? { owner: input.owner } : {}),
    ...(input.parent_run_id ? { parent_run_id: input.parent_run_id } : {}),
    ...(input.fork ? { forked_from_snapshot: input.fork.snapshot_id } : {}),
    ...(failure ? { reason: failure.reason, message: failure.message } : {}),
    // How close this execution is to handing over (continue-as-new), for watchers.
    history_length: workflowInfo().historyLength,
    history_max_events: budget.events,
  });
  /** What a snapshot keeps for a fork: the state `plan()` and the conversation need. */
  const forkState = (): ForkState => ({
    step,
    goal,
    context,
    attempts,
    duplicates_suppressed: duplicatesSuppressed,
    max_steps: input.max_steps,
    policy: input.policy,
    tier: input.tier,
    ...(input.owner ? { owner: input.owner } : {}),
    children: [...children],
    ...(input.policy === 'llm' ? { conversation } : {}),
  });

  const outbox = openOutbox({ org: input.org, run_id: input.run_id, kind: 'agent', lane: input.lanes.agentWorkflows, firstSeq: carry.seq, state });
  const emit = outbox.emit;
  const flushed = outbox.flushed;
  const drainOutbox = outbox.drain;
  const series: SnapshotSeries | undefined =
    input.snapshots && input.lanes.snapshots
      ? openSnapshotSeries({
          org: input.org,
          run_id: input.run_id,
          workflow_id: info.workflowId,
          lane: input.lanes.snapshots,
          config: input.snapshots,
          ...(carry.snapshots ? { carry: carry.snapshots } : {}),
          state: forkState,
          record: (row) => emit('snapshot_captured', { snapshot: row }),
        })
      : undefined;
  /** Cancelling or over: controls that would change the run are ignored from here on. */
  const settling = (): boolean => cancelRequested || isTerminal(status);

  const setStatus = (next: AgentStatus, type: RunEventType = 'status_changed', extra: Record<string, unknown> = {}): void => {
    status = next;
    upsertSearchAttributes([
      { key: AGENT_STATUS_KEY, value: status },
      { key: CURRENT_STEP_KEY, value: step },
    ]);
    emit(type, extra);
  };

  /** A command id seen before is a no-op: Signals may be delivered again after a retry. */
  const firstTime = (commandId: string): boolean => {
    if (processed.has(commandId)) return false;
    processed.add(commandId);
    return true;
  };

  setHandler(pauseSignal, ({ command_id }) => {
    if (!firstTime(command_id) || paused || settling() || status !== 'running') return;
    paused = true;
    setStatus('paused', 'status_changed', { command_id });
  });
  setHandler(resumeSignal, ({ command_id }) => {
    if (!firstTime(command_id) || !paused || settling()) return;
    paused = false;
    setStatus('running', 'status_changed', { command_id });
  });
  setHandler(cancelRunSignal, ({ command_id }) => {
    if (!firstTime(command_id) || settling()) return;
    cancelRequested = true;
    paused = false;
    // A capture in flight is given up, not waited out (it could take up to its timeout).
    series?.interrupt();
    setStatus('cancelling', 'status_changed', { command_id });
  });
  setHandler(injectContextSignal, ({ command_id, text }) => {
    if (!firstTime(command_id) || settling()) return;
    context = `${context}\n[injected: ${text}]`;
    emit('context_injected', { command_id, text });
  });
  setHandler(
    changeGoalUpdate,
    ({ command_id, goal: next }) => {
      if (!firstTime(command_id)) return `ignored: command ${command_id} already applied`;
      const previous = goal;
      goal = next;
      context = `${context}\n[goal changed: ${next}]`;
      emit('goal_changed', { command_id, previous_goal: previous });
      return `goal changed from '${previous}' to '${next}'`;
    },
    {
      // Rejected here means never written to history.
      validator: ({ command_id, goal: next }) => {
        if (typeof next !== 'string' || next.trim() === '') throw new Error('goal must not be empty');
        // Characters are code points, as the schema at the boundary counts them (an emoji is one,
        // not two UTF-16 units): a goal a start accepts must not be refused here.
        if ([...next].length > 500) throw new Error('goal must be at most 500 characters');
        if (!command_id) throw new Error('command_id is required');
        if (settling()) throw new Error(`the run is ${status}; its goal can no longer change`);
      },
    },
  );
  setHandler(statusQuery, () => ({
    ...state(),
    context,
    attempts,
    duplicates_suppressed: duplicatesSuppressed,
    processed_command_ids: [...processed].sort(),
    ...(input.policy === 'llm' ? { conversation } : {}),
    execution_id: workflowInfo().runId,
    history_length: workflowInfo().historyLength,
    history_size: workflowInfo().historySize,
    execution_started_at_step: executionStartedAtStep,
    last_seq: outbox.seq(),
    children: [...children],
    compensations: [...compensations],
    ...(series ? { snapshots: series.rows() } : {}),
  }));

  const result = (): AgentRunResult => ({
    status,
    steps: step,
    attempts,
    duplicates_suppressed: duplicatesSuppressed,
    last_seq: outbox.seq(),
  });

  const runTool = async (next: Extract<Step, { kind: 'tool' }>): Promise<ToolResult> => {
    const call: ToolCall = {
      key: `${info.workflowId}:${step}:${digest(next.tool, JSON.stringify(next.args))}`,
      org: input.org,
      run_id: input.run_id,
      tool: next.tool,
      args: next.args,
    };
    const reuse = reuseKeyFor(call.key);
    if (reuse) call.reuse_key = reuse;
    // The saga in one line: what must be undone if the run is cancelled holding a GPU.
    const hold = next.lane === 'gpu' ? `release_gpu:${call.key}` : undefined;
    if (hold) compensations.push(hold);
    try {
      const result = await (next.lane === 'gpu' ? gpu : cpu).runTool(call);
      if (hold) compensations.splice(compensations.indexOf(hold), 1);
      return result;
    } catch (err) {
      if (err instanceof ActivityFailure && err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'SCHEDULE_TO_START') {
        throw ApplicationFailure.nonRetryable(
          `lane stalled: no worker took '${next.tool}' from task queue '${next.lane === 'gpu' ? input.lanes.gpuTools : input.lanes.cpuTools}' in time`,
          'LaneStalled',
        );
      }
      throw err;
    }
  };

  /** One model call, keyed by this step and what it answers; a fork reuses its parent's reply for the same key. */
  const askModel = (seed: string, messages: ModelCall['messages'], tools: string[]) => {
    const key = `${info.workflowId}:${step}:${digest(seed)}`;
    const reuse = reuseKeyFor(key);
    return model.callModel({ key, ...(reuse ? { reuse_key: reuse } : {}), org: input.org, run_id: input.run_id, messages, tools });
  };

  const think = async (prompt: string): Promise<{ output: string; attempt: number; duplicate: boolean }> => {
    const reply = await askModel(
      prompt,
      [
        { role: 'system', content: `You are an agent working toward this goal: ${goal}` },
        { role: 'user', content: prompt },
      ],
      [],
    );
    return { output: reply.content, attempt: reply.attempt, duplicate: reply.duplicate };
  };

  /** One model turn of the `llm` policy: the whole conversation, every tool on offer. */
  const converse = async (): Promise<{ output: string; attempt: number; duplicate: boolean }> => {
    const last = conversation.messages[conversation.messages.length - 1];
    const reply = await askModel(JSON.stringify(last), conversation.messages, Object.keys(LLM_TOOL_LANES));
    conversation = applyReply(conversation, reply);
    const called = reply.tool_calls.map((c) => c.name).join(', ');
    return { output: called ? `called ${called}` : reply.content, attempt: reply.attempt, duplicate: reply.duplicate };
  };

  const research = async (question: string): Promise<string> => {
    const childId = `${info.workflowId}/research/${step}`;
    children.push(childId);
    if (children.length > MAX_CHILDREN_SHOWN) children.splice(0, children.length - MAX_CHILDREN_SHOWN);
    emit('child_started', { step, child_workflow_id: childId, question });
    return executeChild(ResearchAgent, {
      workflowId: childId,
      taskQueue: input.lanes.agentWorkflows,
      workflowExecutionTimeout: '10m',
      args: [{ org: input.org, run_id: input.run_id, question, lanes: input.lanes }],
    });
  };

  /** Undoes what is held, newest first, even while the run is being cancelled. */
  const compensate = async (): Promise<void> => {
    await CancellationScope.nonCancellable(async () => {
      while (compensations.length) {
        const name = compensations[compensations.length - 1];
        await saga.compensate({ org: input.org, run_id: input.run_id, name });
        compensations.pop();
        emit('compensated', { name });
      }
    });
  };

  const overBudget = (): boolean => {
    const now = workflowInfo();
    return (
      now.continueAsNewSuggested ||
      now.historyLength >= budget.events ||
      now.historySize >= budget.bytes ||
      step - executionStartedAtStep >= input.steps_per_execution
    );
  };

  try {
    if (!input.carry && input.fork) {
      // A fork starts where its snapshot was: workspace restored, state as of then, a parent link.
      const restored = await restorer.restoreSnapshot({ org: input.org, run_id: input.run_id, from_run_id: input.fork.from_run_id, snapshot_id: input.fork.snapshot_id });
      ({ step, context, attempts } = restored.state);
      duplicatesSuppressed = restored.state.duplicates_suppressed;
      if (restored.state.conversation) conversation = restored.state.conversation;
      // The fork's own goal, when it was given one, else the snapshot's. A new goal is noted in the
      // context as a goal change is, and nothing recorded under the old goal is reused.
      goal = input.fork.goal ?? restored.state.goal;
      if (input.fork.goal !== undefined && input.fork.goal !== restored.state.goal) {
        context = `${context}\n[goal changed: ${goal}]`;
        restored.reusable_keys = [];
      }
      executionStartedAtStep = step;
      reusable = new Set(restored.reusable_keys);
      setStatus('running', 'run_started', { forked_from: { run_id: input.fork.from_run_id, snapshot_id: input.fork.snapshot_id, step }, restored: { files: restored.files, bytes: restored.bytes } });
    } else if (!input.carry) {
      // Announced first, so watchers see the run the moment it exists; the workspace comes next.
      setStatus('running', 'run_started');
      await cpu.prepareWorkspace({ org: input.org, run_id: input.run_id, goal });
    }
    series?.start();
    for (;;) {
      await condition(() => !paused || cancelRequested);
      if (cancelRequested) {
        conversation = cancelPending(conversation);
        await series?.finish({ cancelled: true });
        await compensate();
        setStatus('cancelled', 'run_finished');
        break;
      }
      const next =
        input.policy === 'llm'
          ? planLlm({ step, max_steps: input.max_steps, conversation })
          : plan({ step, max_steps: input.max_steps, goal, context, research_every: researchEvery });
      if (next.kind === 'finish') {
        if (series) {
          await series.finish({ cancelled: false });
          // A cancel that arrived during the final capture wins: the loop's top takes the cancel path.
          if (cancelRequested) continue;
          const missing = series.finalMissing();
          if (missing) throw ApplicationFailure.nonRetryable(missing, 'FinalSnapshotMissing');
        }
        setStatus('done', 'run_finished', input.policy === 'llm' && conversation.answer !== undefined ? { answer: conversation.answer.slice(0, 4_000) } : {});
        break;
      }
      // Never on an execution's first step: that would hand over forever.
      if (step > executionStartedAtStep && overBudget()) {
        // A capture never straddles the hand-over: none starts from here on, and the one in flight
        // lands in this execution; the ticker's due time carries over.
        await series?.handOver();
        await condition(allHandlersFinished);
        await flushed();
        // A cancel accepted while the outbox drained is handled here, not dropped by the hand-over.
        if (cancelRequested) continue;
        const nextCarry: AgentCarry = {
          step,
          seq: outbox.seq(),
          goal,
          context: context.slice(-4_000),
          attempts,
          duplicates_suppressed: duplicatesSuppressed,
          processed_command_ids: [...processed].slice(-1_000),
          status,
          children: children.slice(-MAX_CHILDREN_SHOWN),
          ...(input.policy === 'llm' ? { conversation: trimConversation(conversation) } : {}),
          ...(series ? { snapshots: series.carry() } : {}),
          ...(reusable.size ? { reusable_keys: [...reusable] } : {}),
        };
        return await continueAsNew<typeof AgentRun>({ ...input, goal, carry: nextCarry });
      }
      let done: { output: string; attempt: number; duplicate: boolean; tool?: string; lane?: string; resumed_from_tick?: number; output_ref?: string };
      if (next.kind === 'tool' && next.call_id !== undefined) {
        // The model asked for this call: its result, or the error it caused, goes back to the model.
        const callId = next.call_id;
        try {
          const result = await runTool(next);
          conversation = applyToolResult(conversation, callId, result.output);
          done = { output: result.output, attempt: result.attempt, duplicate: result.duplicate, tool: result.tool, lane: result.lane, output_ref: result.output_ref };
        } catch (err) {
          if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === 'BadArguments')) throw err;
          conversation = applyToolResult(conversation, callId, `error: ${err.cause.message}`);
          done = { output: `error: ${err.cause.message}`, attempt: 1, duplicate: false, tool: next.tool, lane: next.lane };
        }
      } else if (next.kind === 'tool') {
        const result = await runTool(next);
        done = {
          output: result.output,
          attempt: result.attempt,
          duplicate: result.duplicate,
          tool: result.tool,
          lane: result.lane,
          ...(result.resumed_from_tick ? { resumed_from_tick: result.resumed_from_tick } : {}),
          ...(result.output_ref ? { output_ref: result.output_ref } : {}),
        };
      } else if (next.kind === 'llm') {
        done = input.policy === 'llm' ? await converse() : await think(next.prompt);
      } else {
        done = { output: await research(next.question), attempt: 1, duplicate: false };
      }
      attempts += done.attempt - 1;
      if (done.duplicate) duplicatesSuppressed += 1;
      context = `${context}\n[${done.tool ?? next.kind}] ${done.output}`.slice(-8_000);
      step += 1;
      upsertSearchAttributes([{ key: CURRENT_STEP_KEY, value: step }]);
      emit('step_completed', {
        step: step - 1,
        kind: next.kind,
        ...(done.tool ? { tool: done.tool, lane: done.lane } : {}),
        ...(done.resumed_from_tick ? { resumed_from_tick: done.resumed_from_tick } : {}),
        ...(done.output_ref ? { output_ref: done.output_ref } : {}),
        attempt: done.attempt,
        duplicate: done.duplicate,
        output: done.output.slice(0, 2_000),
      });
      // After the turn, before the next input goes in: the agent is not writing to its workspace now.
      if (series && !cancelRequested) await series.turn(step);
    }
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err; // not a failure: this execution hands over to the next
    if (isCancellation(err)) {
      // Temporal cancellation: record it, publish it, and let the cancellation stand.
      conversation = cancelPending(conversation);
      await CancellationScope.nonCancellable(async () => series?.finish({ cancelled: true }));
      await compensate();
      await CancellationScope.nonCancellable(async () => {
        setStatus('cancelled', 'run_finished');
        await drainOutbox();
      });
      throw err;
    }
    const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
    const type = cause instanceof ApplicationFailure ? cause.type : undefined;
    failure = {
      reason: type === 'LaneStalled' ? 'lane_stalled' : type === 'FinalSnapshotMissing' ? 'final_snapshot_missing' : type === 'SnapshotUnusable' ? 'snapshot_unusable' : 'activity_failed',
      message: cause instanceof Error ? cause.message : String(cause),
    };
    series?.abandon();
    setStatus('failed', 'run_finished');
    await drainOutbox();
    throw ApplicationFailure.nonRetryable(failure.message, failure.reason);
  }
  await condition(allHandlersFinished);
  await drainOutbox();
  return result();
}
