import type { AgentPolicy, AgentRunState, AgentStatus, RunEvent, Tier } from '@agentrun/contracts';

/** Task queues are passed in, not read from configuration: workflow code has no environment. */
export interface Lanes {
  agentWorkflows: string;
  cpuTools: string;
  gpuTools: string;
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
  carry?: AgentCarry;
}

export interface AgentRunResult {
  status: AgentStatus;
  steps: number;
  attempts: number;
  duplicates_suppressed: number;
  last_seq: number;
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
};

export interface ToolCall {
  /** Idempotency key chosen by workflow code: `{workflow_id}:{step}:{digest}`. */
  key: string;
  org: string;
  run_id: string;
  tool: string;
  args: Record<string, string | number>;
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
}

/** The activities `AgentRun` calls; the activities lib implements them. */
export interface AgentActivities {
  prepareWorkspace(input: { org: string; run_id: string; goal: string }): Promise<void>;
  runTool(call: ToolCall): Promise<ToolResult>;
}

export interface PublishActivities {
  publishRunEvents(events: RunEvent[]): Promise<void>;
}
