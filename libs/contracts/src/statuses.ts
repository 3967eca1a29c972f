export const AGENT_STATUSES = ['queued', 'running', 'paused', 'cancelling', 'cancelled', 'done', 'failed'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];

export const EVAL_STATUSES = ['queued', 'running', 'paused', 'awaiting_review', 'published', 'cancelling', 'cancelled', 'failed'] as const;
export type EvalStatus = (typeof EVAL_STATUSES)[number];

export type RunStatus = AgentStatus | EvalStatus;
export const RUN_STATUSES: readonly RunStatus[] = Array.from(new Set<RunStatus>([...AGENT_STATUSES, ...EVAL_STATUSES]));

export const TERMINAL_STATUSES: readonly RunStatus[] = ['done', 'published', 'cancelled', 'failed'];

/** An eval case's status, and why a failed case failed (the eval run's state and `case_completed`). */
export const CASE_STATUSES = ['pending', 'running', 'ok', 'failed', 'ungraded'] as const;
export type CaseStatus = (typeof CASE_STATUSES)[number];
export const CASE_ERROR_TYPES = ['agent_error', 'infra_error', 'model_key_budget', 'model_key_auth'] as const;
export type CaseErrorType = (typeof CASE_ERROR_TYPES)[number];

export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/**
 * "Never backwards": nothing leaves a terminal status and nothing returns to `queued`.
 * Every other move is the workflow's to make.
 */
export function isForwardMove(from: string, to: string): boolean {
  if (from === to) return true;
  if (isTerminal(from)) return false;
  return to !== 'queued';
}
