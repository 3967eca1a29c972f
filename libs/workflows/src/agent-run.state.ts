import { isTerminal, type AgentRunState, type AgentStatus, type ModelCallUsage, type RunBudget, type RunUsage, type SnapshotRow } from '@agentrun/contracts';
import type { AgentCarry, AgentRunInput, AgentRunResult, AgentRunStatusView, ForkState, RestoreResult, SnapshotSeriesCarry, ToolStepRecord, ToolTimeouts, WorkspacePlacement } from './agent-run.types';
import { plan, planLlm, type Step } from './agent-run.plan';
import { startConversation, trimConversation, type Conversation } from './conversation';

export const DEFAULT_RESEARCH_EVERY = 4;
/** Temporal's hard limits are 50k events / 50 MB; an execution hands over long before. */
export const DEFAULT_HISTORY_BUDGET = { events: 2_000, bytes: 5 * 1024 * 1024 };
/** Values that suit tools taking seconds, not the half-hour jobs a long-running agent may also run. */
export const DEFAULT_TIMEOUTS: ToolTimeouts = { tool_start_to_close_s: 60, tool_heartbeat_s: 10, gpu_schedule_to_start_s: 120 };
const MAX_CHILDREN_SHOWN = 50;

/** What one step produced, as the `step_completed` event reports it. */
export interface StepOutcome {
  output: string;
  attempt: number;
  duplicate: boolean;
  tool?: string;
  lane?: string;
  resumed_from_tick?: number;
  output_ref?: string;
  /** A model call's tokens and cost, when this run spent them (not on a reply a fork reused). */
  usage?: ModelCallUsage;
}

/**
 * Everything `AgentRun` knows about its run: what `plan()` reads, what the status Query shows and
 * what continue-as-new hands to the next execution. Plain state; the workflow's other units change it.
 */
export class AgentLoopState {
  step: number;
  goal: string;
  context: string;
  attempts: number;
  status: AgentStatus;
  duplicatesSuppressed: number;
  conversation: Conversation;
  /** Messages of the conversation already carried by a `step_completed` event (a carried conversation's all were). */
  conversationShown: number;
  executionStartedAtStep: number;
  paused: boolean;
  cancelRequested = false;
  failure: { reason: string; message: string } | undefined;
  /** A fork's parent keys recorded before the fork point: those calls are answered from the ledger, never made again. */
  reusable: Set<string>;
  /** Saga steps to undo, in order taken, if the run is cancelled while holding them. */
  readonly compensations: string[] = [];
  readonly children: string[];
  readonly processed: Set<string>;
  /** The seq the outbox goes on from. */
  readonly firstSeq: number;
  readonly budget: { events: number; bytes: number };
  readonly timeouts: ToolTimeouts;
  /** Host-pinned workspaces: the host holding this run's workspace (absent on a shared volume). */
  placement: WorkspacePlacement | undefined;
  /** Host-pinned workspaces: the tool steps since the latest recovery point, redone if the workspace moves. */
  toolLog: ToolStepRecord[];
  /** The run's model calls added up (undefined before the first). */
  usage: RunUsage | undefined;
  /** The run's spending limit (as started, or last raised). */
  spendLimit: RunBudget | undefined;
  /** Paused because a model call did not fit a budget: `agent.raise_budget` or `agent.resume` lets it go on. */
  budgetPaused: boolean;
  private readonly researchEvery: number;

  constructor(
    private readonly input: AgentRunInput,
    readonly workflowId: string,
  ) {
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
    ({ step: this.step, goal: this.goal, context: this.context, attempts: this.attempts, status: this.status } = carry);
    this.duplicatesSuppressed = carry.duplicates_suppressed;
    this.processed = new Set(carry.processed_command_ids);
    this.executionStartedAtStep = this.step;
    this.paused = this.status === 'paused';
    this.children = [...(carry.children ?? [])];
    this.conversation = carry.conversation ?? startConversation(this.goal);
    this.conversationShown = input.carry?.conversation ? this.conversation.messages.length : 0;
    this.reusable = new Set(carry.reusable_keys ?? []);
    this.firstSeq = carry.seq;
    this.researchEvery = input.research_every ?? DEFAULT_RESEARCH_EVERY;
    this.budget = input.history_budget ?? DEFAULT_HISTORY_BUDGET;
    this.timeouts = input.timeouts ?? DEFAULT_TIMEOUTS;
    this.placement = carry.placement;
    this.toolLog = [...(carry.tool_log ?? [])];
    this.usage = carry.usage;
    this.spendLimit = input.carry ? carry.budget : input.budget;
    this.budgetPaused = carry.budget_paused ?? false;
  }

  /** A command id seen before is a no-op: Signals may be delivered again after a retry. */
  firstTime(commandId: string): boolean {
    if (this.processed.has(commandId)) return false;
    this.processed.add(commandId);
    return true;
  }

  /** Cancelling or over: controls that would change the run are ignored from here on. */
  settling(): boolean {
    return this.cancelRequested || isTerminal(this.status);
  }

  /** The parent's key for the same call, when a fork may reuse what its parent recorded. */
  reuseKeyFor(key: string): string | undefined {
    if (!this.input.fork || this.reusable.size === 0) return undefined;
    const parentKey = this.input.fork.from_workflow_id + key.slice(this.workflowId.length);
    return this.reusable.has(parentKey) ? parentKey : undefined;
  }

  nextStep(): Step {
    return this.input.policy === 'llm'
      ? planLlm({ step: this.step, max_steps: this.input.max_steps, conversation: this.conversation })
      : plan({ step: this.step, max_steps: this.input.max_steps, goal: this.goal, context: this.context, research_every: this.researchEvery });
  }

  /** Time to continue as new; never on an execution's first step, which would hand over forever. */
  dueForHandOver(now: { continueAsNewSuggested: boolean; historyLength: number; historySize: number }): boolean {
    return (
      this.step > this.executionStartedAtStep &&
      (now.continueAsNewSuggested ||
        now.historyLength >= this.budget.events ||
        now.historySize >= this.budget.bytes ||
        this.step - this.executionStartedAtStep >= this.input.steps_per_execution)
    );
  }

  /** A fork starts where its snapshot was; a goal of its own is noted as a goal change is, and reuses nothing. */
  adoptSnapshot(restored: RestoreResult): void {
    const fork = this.input.fork;
    ({ step: this.step, context: this.context, attempts: this.attempts } = restored.state);
    this.duplicatesSuppressed = restored.state.duplicates_suppressed;
    if (restored.state.conversation) this.conversation = restored.state.conversation;
    this.goal = fork?.goal ?? restored.state.goal;
    if (fork?.goal !== undefined && fork.goal !== restored.state.goal) {
      this.context = `${this.context}\n[goal changed: ${this.goal}]`;
      restored.reusable_keys = [];
    }
    this.executionStartedAtStep = this.step;
    this.reusable = new Set(restored.reusable_keys);
  }

  recordStep(kind: Step['kind'], done: StepOutcome): void {
    this.attempts += done.attempt - 1;
    if (done.duplicate) this.duplicatesSuppressed += 1;
    this.context = `${this.context}\n[${done.tool ?? kind}] ${done.output}`.slice(-8_000);
    if (done.usage) this.usage = addUsage(this.usage, done.usage);
    this.step += 1;
  }

  noteChild(childId: string): void {
    this.children.push(childId);
    if (this.children.length > MAX_CHILDREN_SHOWN) this.children.splice(0, this.children.length - MAX_CHILDREN_SHOWN);
  }

  /** The state every run event carries. */
  view(historyLength: number): AgentRunState {
    const { input, failure } = this;
    return {
      status: this.status,
      goal: this.goal,
      step: this.step,
      max_steps: input.max_steps,
      policy: input.policy,
      tier: input.tier,
      ...(input.owner ? { owner: input.owner } : {}),
      ...(input.parent_run_id ? { parent_run_id: input.parent_run_id } : {}),
      ...(input.fork ? { forked_from_snapshot: input.fork.snapshot_id } : {}),
      ...(failure ? { reason: failure.reason, message: failure.message } : {}),
      ...(!failure && this.budgetPaused && this.status === 'paused' ? { reason: 'budget_exhausted' } : {}),
      // How close this execution is to handing over (continue-as-new), for watchers.
      history_length: historyLength,
      history_max_events: this.budget.events,
      ...(this.placement ? { workspace_host: this.placement.host } : {}),
      ...(this.usage ? { usage: { ...this.usage } } : {}),
      ...(this.spendLimit ? { budget: { ...this.spendLimit } } : {}),
    };
  }

  /** What a snapshot keeps for a fork: the state `plan()` and the conversation need. */
  forkState(): ForkState {
    const { input } = this;
    return {
      step: this.step,
      goal: this.goal,
      context: this.context,
      attempts: this.attempts,
      duplicates_suppressed: this.duplicatesSuppressed,
      max_steps: input.max_steps,
      policy: input.policy,
      tier: input.tier,
      ...(input.owner ? { owner: input.owner } : {}),
      children: [...this.children],
      ...(input.policy === 'llm' ? { conversation: this.conversation } : {}),
    };
  }

  statusView(
    execution: { runId: string; historyLength: number; historySize: number },
    lastSeq: number,
    snapshots: SnapshotRow[] | undefined,
  ): AgentRunStatusView {
    return {
      ...this.view(execution.historyLength),
      context: this.context,
      attempts: this.attempts,
      duplicates_suppressed: this.duplicatesSuppressed,
      processed_command_ids: [...this.processed].sort(),
      ...(this.input.policy === 'llm' ? { conversation: this.conversation } : {}),
      execution_id: execution.runId,
      history_length: execution.historyLength,
      history_size: execution.historySize,
      execution_started_at_step: this.executionStartedAtStep,
      last_seq: lastSeq,
      children: [...this.children],
      compensations: [...this.compensations],
      ...(snapshots ? { snapshots } : {}),
    };
  }

  /** What continue-as-new carries: the state `plan()` needs, bounded, never the history. */
  carry(seq: number, snapshots: SnapshotSeriesCarry | undefined): AgentCarry {
    return {
      step: this.step,
      seq,
      goal: this.goal,
      context: this.context.slice(-4_000),
      attempts: this.attempts,
      duplicates_suppressed: this.duplicatesSuppressed,
      processed_command_ids: [...this.processed].slice(-1_000),
      status: this.status,
      children: this.children.slice(-MAX_CHILDREN_SHOWN),
      ...(this.input.policy === 'llm' ? { conversation: trimConversation(this.conversation) } : {}),
      ...(snapshots ? { snapshots } : {}),
      ...(this.reusable.size ? { reusable_keys: [...this.reusable] } : {}),
      ...(this.placement ? { placement: this.placement, tool_log: this.toolLog } : {}),
      ...(this.usage ? { usage: this.usage } : {}),
      ...(this.spendLimit ? { budget: this.spendLimit } : {}),
      ...(this.budgetPaused ? { budget_paused: true } : {}),
    };
  }

  result(lastSeq: number): AgentRunResult {
    return { status: this.status, steps: this.step, attempts: this.attempts, duplicates_suppressed: this.duplicatesSuppressed, last_seq: lastSeq };
  }
}

/** A run's usage with one more call added; cost kept to a millionth of a cent, as each call's is. */
export function addUsage(total: RunUsage | undefined, call: ModelCallUsage): RunUsage {
  const t = total ?? { calls: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0, estimated_calls: 0 };
  return {
    calls: t.calls + 1,
    prompt_tokens: t.prompt_tokens + call.prompt_tokens,
    completion_tokens: t.completion_tokens + call.completion_tokens,
    cost_usd: Math.round((t.cost_usd + call.cost_usd) * 1e8) / 1e8,
    estimated_calls: t.estimated_calls + (call.estimated ? 1 : 0),
  };
}
