import type { CaseErrorType, CaseResult, RunBudget, RunEventEnvelope } from '@agentrun/contracts';
import type { AgentRunInput } from './agent-run.types';

// The run's state and case views are contracts (they travel on the run events); re-exported for the workers.
export { CASE_ERROR_TYPES, type CaseErrorType, type CaseStatus, type CaseView, type EvalRunState } from '@agentrun/contracts';
/** Errors the agent did not cause: left ungraded instead of scored 0 when the flag is on. */
export const NOT_THE_AGENTS_FAULT: readonly CaseErrorType[] = ['infra_error', 'model_key_budget', 'model_key_auth'];

export interface EvalLanes {
  agentWorkflows: string;
  gpuEval: string;
}

/** Where a real eval's cases come from: a suite shipped with the workers, or a dataset in the object store. */
export interface EvalDatasetRef {
  /** The content hash of the cases (the same cases inline, uploaded or shipped have the same id). */
  id: string;
  name: string;
  source: 'shipped' | 'stored';
}

/** A solver or scorer with its options, checked before the run starts; the workflow only carries them. */
export type NamedSpec = { name: string } & Record<string, unknown>;

/** What every case of a real (not synthetic) eval is run with. */
export interface CaseSpec {
  dataset: EvalDatasetRef;
  solver: NamedSpec;
  scorers: NamedSpec[];
  model: string;
  /** A configured model endpoint; absent: `default`. */
  model_endpoint?: string;
}

export interface EvalRunInput {
  org: string;
  run_id: string;
  model: string;
  suite: string;
  case_ids: string[];
  fail_fraction: number;
  reviewers: string[];
  /** Cases in flight at once on the GPU lane. */
  parallelism: number;
  /** AGENTRUN_ERRORED_TURN_UNGRADED: errors the agent did not cause are left ungraded. */
  errored_ungraded: boolean;
  lanes: EvalLanes;
  parent_run_id?: string;
  case_heartbeat_s: number;
  /** Absent: the synthetic solver (seeded rolls, for load tests). */
  spec?: CaseSpec;
  /** The `agent` solver: every case's `AgentRun` child starts from this, with its own id, goal and seed. */
  agent?: AgentCaseTemplate;
  /** As `AgentRunInput.events_via`. */
  events_via?: 'activity' | 'carried';
  /** The eval's limits at its start: each case's worst case is reserved against them (and the org's month). */
  budget?: RunBudget;
}

/** An agent case's run as the starter set it up; the case adds its run id, goal and workspace seed. */
export type AgentCaseTemplate = Omit<AgentRunInput, 'org' | 'run_id' | 'goal' | 'seed' | 'parent_run_id' | 'fork' | 'carry'>;

/** How an agent case's run ended, for its scoring. */
export interface AgentCaseRun {
  child_run_id: string;
  status?: string;
  answer?: string;
  final_snapshot_id?: string;
  /** Why the run did not end `done`, when it failed. */
  error?: string;
  /** From the case's start to its run's end, in workflow time. */
  duration_ms?: number;
}

export interface CaseRequest {
  /** `{org}/{run_id}:{case_id}`: one effect per case per run. */
  key: string;
  org: string;
  run_id: string;
  case_id: string;
  fail_fraction: number;
  spec?: CaseSpec;
  /** The retry policy's attempts: the last one turns a transient error into the case's `infra_error` result. */
  max_attempts?: number;
  /** The eval's limits now: the case's worst case is reserved against them before it runs. */
  budget?: RunBudget;
}

export interface CaseOutcome {
  key: string;
  case_id: string;
  ok: boolean;
  score: number;
  attempt: number;
  duplicate: boolean;
  error_type?: CaseErrorType;
  result?: CaseResult;
}

export interface EvalActivities {
  runCase(request: CaseRequest): Promise<CaseOutcome>;
  /** An agent case's goal: its input as one text. */
  loadAgentCase(request: CaseRequest): Promise<{ goal: string }>;
  /** Scores an agent case from its run's answer and final workspace (the final snapshot's archive). */
  scoreAgentCase(request: CaseRequest & { run: AgentCaseRun }): Promise<CaseOutcome>;
}

export interface EvalPublishActivities {
  publishRunEvents(events: RunEventEnvelope[]): Promise<void>;
}
