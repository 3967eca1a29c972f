import type { CaseErrorType, RunEventEnvelope } from '@agentrun/contracts';

// The run's state and case views are contracts (they travel on the run events); re-exported for the workers.
export { CASE_ERROR_TYPES, type CaseErrorType, type CaseStatus, type CaseView, type EvalRunState } from '@agentrun/contracts';
/** Errors the agent did not cause: left ungraded instead of scored 0 when the flag is on. */
export const NOT_THE_AGENTS_FAULT: readonly CaseErrorType[] = ['infra_error', 'model_key_budget', 'model_key_auth'];

export interface EvalLanes {
  agentWorkflows: string;
  gpuEval: string;
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
}

export interface CaseRequest {
  /** `{org}/{run_id}:{case_id}`: one effect per case per run. */
  key: string;
  org: string;
  run_id: string;
  case_id: string;
  fail_fraction: number;
}

export interface CaseOutcome {
  key: string;
  case_id: string;
  ok: boolean;
  score: number;
  attempt: number;
  duplicate: boolean;
  error_type?: CaseErrorType;
}

export interface EvalActivities {
  runCase(request: CaseRequest): Promise<CaseOutcome>;
}

export interface EvalPublishActivities {
  publishRunEvents(events: RunEventEnvelope[]): Promise<void>;
}
