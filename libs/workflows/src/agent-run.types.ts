import type { AgentPolicy, AgentRunState, AgentStatus, HostLanes, ModelCallUsage, RunBudget, RunEventEnvelope, RunUsage, SnapshotRow, Tier } from '@agentrun/contracts';
import type { Conversation } from './conversation';

/** Task queues are passed in, not read from configuration: workflow code has no environment. */
export interface Lanes {
  agentWorkflows: string;
  cpuTools: string;
  gpuTools: string;
  /** Where captures run (the snapshotter); needed only by runs with a snapshot series. */
  snapshots?: string;
}

/** A run's snapshot settings with every default filled in (see `SnapshotSettings` in the contracts). */
export interface SnapshotSeriesConfig {
  interval_seconds: number;
  per_turn: boolean;
  at_end: boolean;
  timeout_seconds: number;
  max_snapshots: number;
  /** A capture after every this many steps (the recovery points of a run on a workspace host). */
  every_steps?: number;
}

/**
 * Where a run's workspace lives when workspaces are host-pinned: the host that prepared (or restored)
 * it, and that host's own queues, which every later workspace activity of the run goes to.
 */
export interface WorkspacePlacement {
  host: string;
  lanes: HostLanes;
}

/** A tool step the run took since its latest recovery point: redone on a new host if the workspace moves. */
export interface ToolStepRecord {
  step: number;
  call: ToolCall;
  lane: 'cpu' | 'gpu';
}

/** What the series carries across continue-as-new: its budget, ordinals and the ticker's due time. */
export interface SnapshotSeriesCarry {
  /** Rows recorded so far; the next row is `snap-{ordinal + 1}`. */
  ordinal: number;
  /** Interior captures attempted: what `max_snapshots` bounds (failed ones count; the final does not). */
  attempts: number;
  /** A spent budget is recorded once. */
  limit_recorded: boolean;
  started_at_ms: number;
  next_tick_at_ms?: number;
  /** The newest row whose archive landed (what a moved workspace is restored from). */
  latest?: { snapshot_id: string; step: number };
  /** The newest trajectory segment that landed: the next capture writes only the events after it. */
  trajectory?: TrajectorySegment;
}

/** A stored trajectory segment: the run's events `first_seq`..`last_seq`. */
export interface TrajectorySegment {
  first_seq: number;
  last_seq: number;
}

/** The agent's state a fork starts from: what `plan()` needs, plus the conversation. */
export interface ForkState {
  step: number;
  goal: string;
  context: string;
  attempts: number;
  duplicates_suppressed: number;
  max_steps: number;
  policy: AgentPolicy;
  tier: Tier;
  owner?: string;
  children: string[];
  conversation?: Conversation;
}

export interface CaptureInput {
  org: string;
  run_id: string;
  /** Whose effect-ledger keys are this run's (`{workflow_id}:{step}:...`). */
  workflow_id: string;
  snapshot_id: string;
  version: number;
  is_final: boolean;
  state: ForkState;
  /** The newest segment that landed; absent, the capture writes the trajectory from seq 1. */
  trajectory_after?: TrajectorySegment;
}

/** What a capture heartbeats, so a capture that timed out after its archive landed still yields a row. */
export interface CaptureProgress {
  phase: 'archive' | 'trajectory' | 'state';
  bytes?: number;
  bundle_object_url?: string;
}

export interface CaptureResult {
  artifact_id: string;
  bundle_object_url: string;
  bytes: number;
  trajectory_s3_uri?: string;
  /** The segment `trajectory_s3_uri` names (set whenever it is). */
  trajectory_segment?: TrajectorySegment;
  env_universe_id?: string;
  env_universe_version?: number;
  /** Degraded reads (trajectory, env state): the row is `partial` when there are any. */
  reasons: string[];
}

export interface SnapshotActivities {
  captureSnapshot(input: CaptureInput): Promise<CaptureResult>;
}

/** What a forked run starts from. */
export interface ForkInput {
  from_run_id: string;
  from_workflow_id: string;
  snapshot_id: string;
  /** The fork's own goal; absent, it keeps the snapshot's. */
  goal?: string;
}

export interface RestoreResult {
  state: ForkState;
  /** The parent's effect keys recorded when the snapshot was taken at or after its step: reused, never repeated. */
  reusable_keys: string[];
  files: number;
  bytes: number;
  /** Set by a workspace host: the workspace is now there. */
  placement?: WorkspacePlacement;
}

/** Tool activity bounds, in seconds. */
export interface ToolTimeouts {
  tool_start_to_close_s: number;
  /** A worker that stops heartbeating this long is presumed dead; the retry resumes from its last tick. */
  tool_heartbeat_s: number;
  /** How long GPU work may wait for a worker before the run fails with `lane_stalled`. */
  gpu_schedule_to_start_s: number;
  /** How long work on the run's workspace host may wait before the host counts as lost (default 30). */
  host_schedule_to_start_s?: number;
}

/** What continue-as-new carries: the state `plan()` needs, never the history. */
export interface AgentCarry {
  step: number;
  seq: number;
  goal: string;
  context: string;
  attempts: number;
  duplicates_suppressed: number;
  processed_command_ids: string[];
  status: AgentStatus;
  /** The newest sub-agents, for the status Query (bounded). */
  children: string[];
  /** The `llm` policy's conversation (bounded). */
  conversation?: Conversation;
  /** The snapshot series, when the run has one. */
  snapshots?: SnapshotSeriesCarry;
  /** A fork's reusable parent keys that later steps may still meet. */
  reusable_keys?: string[];
  /** The workspace host, when workspaces are host-pinned, and the tool steps since the latest recovery point. */
  placement?: WorkspacePlacement;
  tool_log?: ToolStepRecord[];
  /** The run's model calls so far, added up. */
  usage?: RunUsage;
  /** The run's limits as last raised, and whether it is paused on them. */
  budget?: RunBudget;
  budget_paused?: boolean;
}

export interface AgentRunInput {
  org: string;
  run_id: string;
  goal: string;
  max_steps: number;
  policy: AgentPolicy;
  tier: Tier;
  owner?: string;
  parent_run_id?: string;
  lanes: Lanes;
  /** Steps one execution may take before it continues as new (the history budget). */
  steps_per_execution: number;
  /** History events and bytes one execution may reach before it continues as new. */
  history_budget?: { events: number; bytes: number };
  /** A `ResearchAgent` child every this many four-step cycles (default 4). */
  research_every?: number;
  timeouts?: ToolTimeouts;
  /** The capture series; absent means no snapshots (on a workspace host: recovery points only). */
  snapshots?: SnapshotSeriesConfig;
  /** On a workspace host, a run without a series captures a recovery point every this many steps (default 10). */
  recovery_every_steps?: number;
  /** Set when this run is a fork of another run's snapshot. */
  fork?: ForkInput;
  carry?: AgentCarry;
  /** The model the run's model calls name; absent: the worker's configured model. */
  model?: string;
  /** The run's spending limit at its start (raised later by `agent.raise_budget`, carried across continue-as-new). */
  budget?: RunBudget;
  /**
   * The run whose limits this run's model calls count against, when not its own: an eval's agent case
   * spends under its eval's budget (`budget` is then the eval's limits, and the eval's raises reach the
   * run as `budgetLimitsSignal`; a refusal is told to the eval as `caseBudgetExhaustedSignal`).
   */
  budget_run_id?: string;
  /** An eval case this run solves: its files seed the workspace before the first step. */
  seed?: WorkspaceSeed;
  /**
   * `carried` (AGENTRUN_RUN_EVENTS_VIA's default): events ride the run's calls on the `cpu-tools` lanes,
   * and what none carries leaves by a `publishRunEvents` activity; `activity`: every batch by that
   * activity. Either way only the events of workflow tasks in the history are published. `CurrentStep`
   * is upserted every 20 steps (every step in executions recorded before the patch that says so).
   * Absent: the workflow-task sink, which a cut-off task can make publish two different events under one seq.
   */
  events_via?: 'activity' | 'carried';
}

/** An eval case whose files a run's workspace starts with. */
export interface WorkspaceSeed {
  dataset: { id: string; name: string; source: 'shipped' | 'stored' };
  case_id: string;
}

export interface AgentRunResult {
  status: AgentStatus;
  steps: number;
  attempts: number;
  duplicates_suppressed: number;
  last_seq: number;
  /** The `llm` policy's final answer, when it gave one. */
  answer?: string;
  /** The final snapshot, when the run's series took one that landed. */
  final_snapshot_id?: string;
}

export type AgentRunStatusView = AgentRunState & {
  context: string;
  attempts: number;
  duplicates_suppressed: number;
  processed_command_ids: string[];
  execution_id: string;
  history_length: number;
  history_size: number;
  execution_started_at_step: number;
  last_seq: number;
  children: string[];
  compensations: string[];
  conversation?: Conversation;
  snapshots?: SnapshotRow[];
};

export interface ToolCall {
  /** Idempotency key chosen by workflow code: `{workflow_id}:{step}:{digest}`. */
  key: string;
  org: string;
  run_id: string;
  tool: string;
  args: Record<string, string | number>;
  /** A fork's parent key for the same call, recorded before the fork point: its result is reused. */
  reuse_key?: string;
  /**
   * Redo a step already recorded, on the host a workspace moved to: the tool runs again for its files,
   * the recorded result is returned, nothing is recorded or billed.
   */
  replay?: boolean;
  /**
   * A GPU call of a run on a workspace host: the object-store key of the workspace the host staged for
   * it. The GPU worker runs the tool on a copy restored from it and returns the files it wrote.
   */
  staged?: string;
}

/** A file a GPU call wrote, returned to the workspace's host to write there. */
export interface FileWrite {
  path: string;
  content_base64: string;
}

export interface ToolResult {
  key: string;
  tool: string;
  output: string;
  /** The attempt that produced the effect (above 1 means a retry happened). */
  attempt: number;
  lane: string;
  /** True when served from the ledger: the effect had already happened. */
  duplicate: boolean;
  /** The heartbeat tick this attempt resumed from, when an earlier attempt got that far. */
  resumed_from_tick?: number;
  /** Where the whole output is, when it was too large to keep in history (`output` is a preview). */
  output_ref?: string;
  /** A staged GPU call's files, for the workspace's host to write (or their object-store key when large). */
  writes?: FileWrite[];
  writes_ref?: string;
}

/** A chat message in the OpenAI function-calling shape. */
export interface ChatTurn {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

export interface ModelCall {
  /** Idempotency key chosen by workflow code: one bill per key. */
  key: string;
  org: string;
  run_id: string;
  messages: ChatTurn[];
  /** Names of the tools the model may call; empty for a plain completion. */
  tools: string[];
  reuse_key?: string;
  /** The model to ask; absent: the worker's configured model. */
  model?: string;
  /** The run's limits: the call's worst case is reserved against them (and the org's monthly budget) first. */
  budget?: RunBudget;
  /** The run whose spending `budget` limits, when not `run_id` (an eval's agent case: its eval). */
  budget_run_id?: string;
  /** The run's tier: its weight in the fair share of a model's shared rate limits (`batch` when absent). */
  tier?: Tier;
  /** Attempts made by earlier activities of this call (before rate-limit waits): its reply's deltas are numbered after them. */
  attempts_before?: number;
  /** The run's step this call's reply belongs to, when the key does not say (a research child's call is its parent's step). */
  step?: number;
}

/** The failure type `callModel` reports when a call's worst case does not fit a budget; its first detail is the `BudgetShortfall` (contracts). */
export const BUDGET_EXHAUSTED = 'BudgetExhausted';

/**
 * The failure type `callModel` reports when the model's shared rate limits have no room for the call
 * yet; its first detail is `{ wait_ms }`. The workflow waits that long on a timer (holding no worker
 * slot) and makes the call again.
 */
export const RATE_LIMIT_WAIT = 'RateLimitWait';


export interface ModelReply {
  key: string;
  content: string;
  tool_calls: { id: string; name: string; arguments: string }[];
  finish_reason: string;
  attempt: number;
  duplicate: boolean;
  /** Where the whole reply is, when it was too large to keep in history (`content` is a preview). */
  content_ref?: string;
  /** The call's tokens and cost (absent in replies recorded before usage was). */
  usage?: ModelCallUsage;
  /** A fork's reply reused from its parent's call: nothing was spent for it. */
  reused?: boolean;
}

/** The activities `AgentRun` calls; the activities lib implements them. */
export interface AgentActivities {
  /** Makes the run's workspace; a workspace host answers with its placement (nothing on a shared volume). */
  prepareWorkspace(input: { org: string; run_id: string; goal: string; seed?: WorkspaceSeed }): Promise<WorkspacePlacement | void>;
  runTool(call: ToolCall): Promise<ToolResult>;
  /** On a workspace host: packs the run's workspace into the object store for one GPU call (`ToolCall.staged`). */
  stageWorkspace(input: { org: string; run_id: string; key: string }): Promise<{ ref: string; bytes: number }>;
  /** On a workspace host: writes the files a staged GPU call returned; how many. */
  applyWrites(input: { org: string; run_id: string; writes?: FileWrite[]; writes_ref?: string }): Promise<number>;
  callModel(call: ModelCall): Promise<ModelReply>;
  /** Undoes one saga step; idempotent, so undoing twice is undoing once. */
  compensate(input: { org: string; run_id: string; name: string }): Promise<string>;
  /**
   * A fork's first step: the snapshot's workspace restored into this run's, and the state it starts
   * from. Also how a workspace moves: the run's own snapshot restored on another host.
   */
  restoreSnapshot(input: { org: string; run_id: string; from_run_id: string; snapshot_id: string }): Promise<RestoreResult>;
}

export interface ResearchInput {
  org: string;
  run_id: string;
  question: string;
  lanes: Lanes;
  /**
   * The parent run's events not yet known to be published, when it hands them to the child: its model
   * call carries them, and its answer says how far they went (`CarriedResult` around the answer).
   */
  run_events?: RunEventEnvelope[];
  /** The parent run's limits: the child's call is reserved against them (under the parent's run id), as the parent's own. */
  budget?: RunBudget;
  /** The run the parent spends under, when not its own (an eval's agent case: its eval). */
  budget_run_id?: string;
  /** The parent run's tier, for its turn under a model's shared rate limits. */
  tier?: Tier;
  /** The parent's step this research is, for the deltas of the child's reply. */
  step?: number;
}

/** What a research child answers: its text and what its model call cost (a child recorded before this answered the text alone). */
export interface ResearchAnswer {
  answer: string;
  usage?: ModelReply['usage'];
  reused?: boolean;
}

export interface PublishActivities {
  publishRunEvents(events: RunEventEnvelope[]): Promise<void>;
}
