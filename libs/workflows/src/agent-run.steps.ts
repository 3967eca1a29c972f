import { ActivityFailure, ApplicationFailure, executeChild, proxyActivities, TimeoutFailure, upsertSearchAttributes } from '@temporalio/workflow';
import { TOOL_NAMES } from '@agentrun/contracts';
import type { AgentActivities, AgentRunInput, ChatTurn, ModelCall, ModelReply, ResearchAnswer, ToolCall, ToolResult, ToolTimeouts, WorkspacePlacement } from './agent-run.types';
import type { Step } from './agent-run.plan';
import type { AgentLoopState, StepOutcome } from './agent-run.state';
import { applyReply, applyToolResult } from './conversation';
import { digest } from './digest';
import { CARRIED_EVENTS_KEY, publishesBySink, type Outbox } from './outbox';
import type { Patches } from './patches';
import { ResearchAgent } from './research-agent.workflow';
import { FOREVER, MODEL_RETRY, TOOL_RETRY } from './retry-policies';
import { CURRENT_STEP_KEY } from './search-attributes';
import { inTurn } from './model-turn';

const PRIORITY_FOR_TIER = { enterprise: 1, team: 3, batch: 5 } as const;

/**
 * While a run runs, `CurrentStep` is upserted every this many steps (and with every status change,
 * which carries it too): each upsert is a billable Temporal action and a history event, and the read
 * model has every step anyway. Executions recorded before this upserted it every step. It came with
 * publishing by sink, under that patch; executions that publish by activity take it under their own
 * (each patch id costs a marker and an upsert per execution).
 */
export const CURRENT_STEP_EVERY = 20;

/** Marks the executions that publish by activity and upsert `CurrentStep` every `CURRENT_STEP_EVERY` steps. */
export const SPARSE_CURRENT_STEP_PATCH = 'current-step-upserted-every-20-steps';
/**
 * Marks the carried executions whose `gpu-tools` calls carry run events too (the GPU worker publishes
 * them as the orchestrator does); those recorded before it sent a GPU step's events by activity.
 */
export const GPU_CALLS_CARRY_PATCH = 'gpu-calls-carry-run-events';
/** Marks the carried executions whose research children carry the run's events on their model call. */
export const RESEARCH_CARRY_PATCH = 'research-children-carry-run-events';

type ToolStep = Extract<Step, { kind: 'tool' }>;

/** The activity stubs of one run, each with the bounds of its lane. */
export interface AgentRunActivities {
  cpu: AgentActivities;
  gpu: AgentActivities;
  model: AgentActivities;
  restorer: AgentActivities;
  saga: AgentActivities;
  /** The shared CPU lane, where any workspace host may take a run's workspace (prepare it anew). */
  claim: AgentActivities;
}

/** How long work waits on a workspace host's own queue before the host counts as lost. */
const DEFAULT_HOST_SCHEDULE_TO_START_S = 30;

/** The host bound of a run, in seconds: what every call (captures too) on a host's queue may wait. */
export function hostWaitSecondsOf(timeouts: ToolTimeouts): number {
  return timeouts.host_schedule_to_start_s ?? DEFAULT_HOST_SCHEDULE_TO_START_S;
}

/**
 * The stubs of one run. With a placement (host-pinned workspaces) the workspace lanes are the host's
 * own queues, bounded by schedule-to-start so a lost host is noticed; model calls, compensations,
 * restores and claims stay on the shared lanes, which any live host serves.
 */
export function agentRunActivities(input: AgentRunInput, timeouts: ToolTimeouts, placement?: WorkspacePlacement, carry: Outbox['carry'] = (a) => a): AgentRunActivities {
  const hostWait = placement ? { scheduleToStartTimeout: `${hostWaitSecondsOf(timeouts)}s` } : {};
  const cpu = proxyActivities<AgentActivities>({
    taskQueue: placement?.lanes.cpuTools ?? input.lanes.cpuTools,
    ...hostWait,
    startToCloseTimeout: `${timeouts.tool_start_to_close_s}s`,
    heartbeatTimeout: `${timeouts.tool_heartbeat_s}s`,
    retry: TOOL_RETRY,
  });
  const claim = placement
    ? proxyActivities<AgentActivities>({
        taskQueue: input.lanes.cpuTools,
        startToCloseTimeout: `${timeouts.tool_start_to_close_s}s`,
        heartbeatTimeout: `${timeouts.tool_heartbeat_s}s`,
        retry: TOOL_RETRY,
      })
    : cpu;
  // Always the shared GPU lane, with tier priority and tenant fairness: on a workspace host the call
  // gets the workspace by reference (staged) and returns what it wrote (see `toolOnHost`).
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
  // The workers of every lane publish the run events its calls carry: `cpu-tools` (the shared one or a
  // host's) is the orchestrator's; the GPU worker's calls carry too since GPU_CALLS_CARRY_PATCH.
  return { cpu: carry(cpu), gpu: carry(gpu, GPU_CALLS_CARRY_PATCH), model: carry(model), restorer: carry(restorer), saga: carry(saga), claim: carry(claim) };
}

/**
 * A tool call of a run on a workspace host. CPU tools run on the host's own queue. A GPU tool runs on
 * the shared GPU lane: the host stages the workspace into the object store, the GPU worker runs the tool
 * on a copy and returns the files it wrote (recorded with its result), and the host writes them.
 */
export async function toolOnHost(activities: AgentRunActivities, input: AgentRunInput, call: ToolCall, lane: 'cpu' | 'gpu'): Promise<ToolResult> {
  if (lane === 'cpu') return activities.cpu.runTool(call);
  const staged = await activities.cpu.stageWorkspace({ org: input.org, run_id: input.run_id, key: call.key });
  let result: ToolResult;
  try {
    result = await activities.gpu.runTool({ ...call, staged: staged.ref });
  } catch (err) {
    // The shared GPU lane stalling is not the host's fault: the run fails as `lane_stalled`, as anywhere.
    if (hostLost(err)) throw ApplicationFailure.nonRetryable(`lane stalled: no worker took '${call.tool}' from task queue '${input.lanes.gpuTools}' in time`, 'LaneStalled');
    throw err;
  }
  await activities.cpu.applyWrites({
    org: input.org,
    run_id: input.run_id,
    ...(result.writes ? { writes: result.writes } : {}),
    ...(result.writes_ref ? { writes_ref: result.writes_ref } : {}),
  });
  return result;
}

/** A workspace activity that no worker of the run's host took in time: the host is lost. */
export function hostLost(err: unknown): boolean {
  return err instanceof ActivityFailure && err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'SCHEDULE_TO_START';
}


/** Where a run's workspace is, and how it moves: implemented by `WorkspaceHosts`. */
export interface WorkspaceMover {
  /** Set when workspaces are host-pinned. */
  pinned(): boolean;
  /** The run's host is lost: the workspace is restored on another host, its recent tool steps redone there. */
  move(): Promise<void>;
  /** A tool step the run took (kept until the next recovery point). */
  took(step: number, call: ToolCall, lane: 'cpu' | 'gpu'): void;
}

/**
 * Runs the steps `plan()` chooses: tools on their lanes, model calls, research children. Every call
 * is keyed by the workflow id and the step, so a retry or a fork meets the effect it already had.
 *
 * Each method awaits its activity once and returns: the workflow resumes after the same number of
 * microtask turns as when these were inline closures, which keeps the order of commands that saved
 * histories recorded (a command issued one turn later can land after another coroutine's).
 */
export class StepExecutor {
  private readonly sparseCurrentStep: boolean;
  /** Executions recorded before step events carried the conversation publish events of the sizes they had, so their histories replay. */
  private readonly saysMessages: boolean;

  constructor(
    private readonly input: AgentRunInput,
    private readonly run: AgentLoopState,
    private readonly activities: AgentRunActivities,
    private readonly outbox: Outbox,
    patches: Patches,
    private readonly hosts?: WorkspaceMover,
  ) {
    // Asked while the executor is built, in the execution's first task, so the marker lands there.
    this.sparseCurrentStep = publishesBySink(input.events_via, patches) || patches.has(SPARSE_CURRENT_STEP_PATCH);
    this.saysMessages = input.policy === 'llm' && patches.has(STEP_MESSAGES_PATCH);
  }

  /** A tool `plan()` chose. */
  async tool(next: ToolStep): Promise<StepOutcome> {
    const { call, hold } = this.toolCall(next);
    let result: ToolResult;
    try {
      result = await this.onHost(next, call);
    } catch (err) {
      throw this.stalled(next, err);
    }
    this.release(hold);
    return {
      output: result.output,
      attempt: result.attempt,
      duplicate: result.duplicate,
      tool: result.tool,
      lane: result.lane,
      ...(result.resumed_from_tick ? { resumed_from_tick: result.resumed_from_tick } : {}),
      ...(result.output_ref ? { output_ref: result.output_ref } : {}),
    };
  }

  /** A tool the model asked for: its result, or the error its arguments caused, goes back to the model. */
  async requestedTool(next: ToolStep, callId: string): Promise<StepOutcome> {
    const { call, hold } = this.toolCall(next);
    let result: ToolResult;
    try {
      result = await this.onHost(next, call);
    } catch (err) {
      const failure = this.stalled(next, err);
      if (!(failure instanceof ActivityFailure && failure.cause instanceof ApplicationFailure && failure.cause.type === 'BadArguments')) throw failure;
      this.run.conversation = applyToolResult(this.run.conversation, callId, `error: ${failure.cause.message}`);
      return { output: `error: ${failure.cause.message}`, attempt: 1, duplicate: false, tool: next.tool, lane: next.lane };
    }
    this.release(hold);
    this.run.conversation = applyToolResult(this.run.conversation, callId, result.output);
    return { output: result.output, attempt: result.attempt, duplicate: result.duplicate, tool: result.tool, lane: result.lane, output_ref: result.output_ref };
  }

  /** A model call of the scripted policy: one prompt toward the goal. */
  async think(prompt: string): Promise<StepOutcome> {
    const reply = await this.askModel(
      prompt,
      [
        { role: 'system', content: `You are an agent working toward this goal: ${this.run.goal}` },
        { role: 'user', content: prompt },
      ],
      [],
    );
    return { output: reply.content, attempt: reply.attempt, duplicate: reply.duplicate, ...spent(reply) };
  }

  /** One model turn of the `llm` policy: the whole conversation, every tool on offer. */
  async converse(): Promise<StepOutcome> {
    const { conversation } = this.run;
    const last = conversation.messages[conversation.messages.length - 1];
    const reply = await this.askModel(JSON.stringify(last), conversation.messages, TOOL_NAMES);
    this.run.conversation = applyReply(this.run.conversation, reply);
    const called = reply.tool_calls.map((c) => c.name).join(', ');
    return { output: called ? `called ${called}` : reply.content, attempt: reply.attempt, duplicate: reply.duplicate, ...spent(reply) };
  }

  /** A `ResearchAgent` child: its own history; this run sees its answer. */
  async research(question: string): Promise<StepOutcome> {
    const { run, input } = this;
    const childId = `${run.workflowId}/research/${run.step}`;
    run.noteChild(childId);
    this.outbox.emit('child_started', { step: run.step, child_workflow_id: childId, question });
    // The child's model call carries this run's unpublished events (child_started among them), as a
    // call of its own would: the run schedules nothing else while the child works.
    const budget = this.run.spendLimit;
    const answered = await this.outbox.carryWith<string | ResearchAnswer>(
      (carried) =>
        executeChild(ResearchAgent, {
          workflowId: childId,
          taskQueue: input.lanes.agentWorkflows,
          workflowExecutionTimeout: '10m',
          args: [
            {
              org: input.org,
              run_id: input.run_id,
              question,
              lanes: input.lanes,
              tier: input.tier,
              step: run.step,
              ...(budget ? { budget } : {}),
              ...(input.budget_run_id ? { budget_run_id: input.budget_run_id } : {}),
              ...(carried ? { run_events: carried[CARRIED_EVENTS_KEY] } : {}),
            },
          ],
        }),
      RESEARCH_CARRY_PATCH,
    );
    // A child recorded before answers were objects answered its text alone.
    if (typeof answered === 'string') return { output: answered, attempt: 1, duplicate: false };
    return { output: answered.answer, attempt: 1, duplicate: false, ...(answered.usage && !answered.reused ? { usage: answered.usage } : {}) };
  }

  /** Takes a finished step into the state and publishes it. */
  completed(next: Exclude<Step, { kind: 'finish' }>, done: StepOutcome): void {
    this.run.recordStep(next.kind, done);
    if (!this.sparseCurrentStep || this.run.step % CURRENT_STEP_EVERY === 0) upsertSearchAttributes([{ key: CURRENT_STEP_KEY, value: this.run.step }]);
    this.outbox.emit('step_completed', {
      step: this.run.step - 1,
      kind: next.kind,
      ...(done.tool ? { tool: done.tool, lane: done.lane } : {}),
      ...(done.resumed_from_tick ? { resumed_from_tick: done.resumed_from_tick } : {}),
      ...(done.output_ref ? { output_ref: done.output_ref } : {}),
      attempt: done.attempt,
      duplicate: done.duplicate,
      output: storable(done.output, 2_000).text,
      ...(done.usage ? { usage: done.usage } : {}),
      ...this.newMessages(),
    });
  }

  /**
   * The `llm` conversation's messages since the last step said (all of them at a run's or a fork's first
   * step), so the conversation can be read back from the run's events alone. Each text is bounded.
   */
  private newMessages(): { messages?: ChatTurnShown[] } {
    const { run } = this;
    if (!this.saysMessages) return {};
    // At most MESSAGES_EVENT_MAX characters an event (a fork's first step has its parent's whole
    // conversation to say): what does not fit is said by the steps after, in order.
    const messages: ChatTurnShown[] = [];
    let size = 0;
    for (const turn of run.conversation.messages.slice(run.conversationShown)) {
      const shown = shownTurn(turn);
      const length = JSON.stringify(shown).length;
      if (messages.length > 0 && size + length > MESSAGES_EVENT_MAX) break;
      messages.push(shown);
      size += length;
    }
    run.conversationShown += messages.length;
    return messages.length ? { messages } : {};
  }

  private lane(next: ToolStep): AgentActivities {
    return next.lane === 'gpu' ? this.activities.gpu : this.activities.cpu;
  }

  /**
   * The tool call on the run's lane. With host-pinned workspaces, a lost host moves the workspace and
   * the call is made again on the new host, as a replay: answered from the ledger (and its files made
   * again) if the lost host had recorded it, made for the first time otherwise.
   */
  private async onHost(next: ToolStep, call: ToolCall): Promise<ToolResult> {
    const { hosts } = this;
    if (!hosts?.pinned()) return this.lane(next).runTool(call);
    let attempt = call;
    for (;;) {
      const lane = next.lane === 'gpu' ? 'gpu' : 'cpu';
      try {
        const result = await toolOnHost(this.activities, this.input, attempt, lane);
        hosts.took(this.run.step, call, lane);
        return result;
      } catch (err) {
        if (!hostLost(err)) throw err;
        await hosts.move();
        attempt = { ...call, replay: true };
      }
    }
  }

  /** The call and, on the GPU lane, the saga step that must be undone if the run is cancelled holding it. */
  private toolCall(next: ToolStep): { call: ToolCall; hold: string | undefined } {
    const { run, input } = this;
    const call: ToolCall = {
      key: `${run.workflowId}:${run.step}:${digest(next.tool, JSON.stringify(next.args))}`,
      org: input.org,
      run_id: input.run_id,
      tool: next.tool,
      args: next.args,
    };
    const reuse = run.reuseKeyFor(call.key);
    if (reuse) call.reuse_key = reuse;
    const hold = next.lane === 'gpu' ? `release_gpu:${call.key}` : undefined;
    if (hold) run.compensations.push(hold);
    return { call, hold };
  }

  private release(hold: string | undefined): void {
    if (hold) this.run.compensations.splice(this.run.compensations.indexOf(hold), 1);
  }

  /** A task queue no worker took the call from in time is a lane stalled: the run fails, naming the lane. */
  private stalled(next: ToolStep, err: unknown): unknown {
    if (hostLost(err)) {
      return ApplicationFailure.nonRetryable(
        `lane stalled: no worker took '${next.tool}' from task queue '${next.lane === 'gpu' ? this.input.lanes.gpuTools : this.input.lanes.cpuTools}' in time`,
        'LaneStalled',
      );
    }
    return err;
  }

  /** One model call, keyed by this step and what it answers; a fork reuses its parent's reply for the same key. */
  private askModel(seed: string, messages: ModelCall['messages'], tools: string[]) {
    const key = `${this.run.workflowId}:${this.run.step}:${digest(seed)}`;
    const reuse = this.run.reuseKeyFor(key);
    const budget = this.run.spendLimit;
    const call: ModelCall = {
      key,
      ...(reuse ? { reuse_key: reuse } : {}),
      org: this.input.org,
      run_id: this.input.run_id,
      messages,
      tools,
      ...(this.input.model ? { model: this.input.model } : {}),
      ...(budget ? { budget } : {}),
      ...(this.input.budget_run_id ? { budget_run_id: this.input.budget_run_id } : {}),
      tier: this.input.tier,
    };
    return inTurn((attemptsBefore) => this.activities.model.callModel(attemptsBefore ? { ...call, attempts_before: attemptsBefore } : call));
  }
}

/** What a model call cost this run: its usage, unless the reply was a fork's reuse of its parent's. */
function spent(reply: ModelReply): { usage?: ModelReply['usage'] } {
  return reply.usage && !reply.reused ? { usage: reply.usage } : {};
}

/** A conversation message as a run event carries it: texts over `MESSAGE_TEXT_MAX` cut, and marked. */
export type ChatTurnShown = ChatTurn & { truncated?: true };
const MESSAGE_TEXT_MAX = 8_000;
/** The conversation one step event says at most (characters of JSON), well under a Kafka record's 1 MiB. */
const MESSAGES_EVENT_MAX = 200_000;
export const STEP_MESSAGES_PATCH = 'agent-run-step-messages';

/**
 * A text as a run event can carry it: at most `max` UTF-16 units, never cutting a surrogate pair in
 * two, and with NUL (which Postgres cannot store in JSON) replaced by U+FFFD.
 */
function storable(text: string, max: number): { text: string; cut: boolean } {
  let out = text.length > max ? text.slice(0, max) : text;
  const cut = out.length < text.length;
  if (cut && /[\uD800-\uDBFF]$/.test(out)) out = out.slice(0, -1);
  return { text: out.includes('\u0000') ? out.split('\u0000').join('\uFFFD') : out, cut };
}

function shownTurn(turn: ChatTurn): ChatTurnShown {
  let truncated = false;
  const cut = (text: string) => {
    const stored = storable(text, MESSAGE_TEXT_MAX);
    if (stored.cut) truncated = true;
    return stored.text;
  };
  const shown: ChatTurnShown = {
    role: turn.role,
    content: turn.content === null ? null : cut(turn.content),
    ...(turn.tool_calls ? { tool_calls: turn.tool_calls.map((c) => ({ ...c, function: { name: c.function.name, arguments: cut(c.function.arguments) } })) } : {}),
    ...(turn.tool_call_id ? { tool_call_id: turn.tool_call_id } : {}),
  };
  return truncated ? { ...shown, truncated: true } : shown;
}
