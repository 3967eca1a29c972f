import type { EvalStatus, RunEvent } from '@agentrun/contracts';

export const CASE_ERROR_TYPES = ['agent_error', 'infra_error', 'model_key_budget', 'model_key_auth'] as const;
export type CaseErrorType = (typeof CASE_ERROR_TYPES)[number];
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

export type CaseStatus = 'pending' | 'running' | 'ok' | 'failed' | 'ungraded';

export interface CaseView {
  status: CaseStatus;
  score?: number;
  attempts?: number;
  error_type?: CaseErrorType;
}

export type EvalRunState = {
  status: EvalStatus;
  model: string;
  suite: string;
  total: number;
  done: number;
  counts: { ok: number; failed: number; ungraded: number };
  /** Mean over graded cases (ok and failed); ungraded cases are left out. */
  score: number | null;
  cases: Record<string, CaseView>;
  reviewers: string[];
  approved_by?: string;
  parent_run_id?: string;
  reason?: string;
  message?: string;
};

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
  publishRunEvents(events: RunEvent[]): Promise<void>;
}
