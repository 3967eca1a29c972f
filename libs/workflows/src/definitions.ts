import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { BudgetShortfall, RunBudget } from '@agentrun/contracts';
import type { AgentRunStatusView } from './agent-run.types';

/** Signals, the Query and the Update of `AgentRun`, defined once: clients import these, never strings. */
export const pauseSignal = defineSignal<[{ command_id: string }]>('pause');
export const resumeSignal = defineSignal<[{ command_id: string }]>('resume');
export const cancelRunSignal = defineSignal<[{ command_id: string }]>('cancel_run');
export const injectContextSignal = defineSignal<[{ command_id: string; text: string }]>('inject_context');
export const statusQuery = defineQuery<AgentRunStatusView>('status');
/** An Update rather than a Signal: the sender learns whether the validator accepted the goal. */
export const changeGoalUpdate = defineUpdate<string, [{ command_id: string; goal: string }]>('change_goal');
/** The run's new limits (totals); an Update so the sender learns whether they were accepted (each must be higher). */
export const raiseBudgetUpdate = defineUpdate<string, [{ command_id: string; max_tokens?: number; max_cost_usd?: number }]>('raise_budget');
/** From an eval to its agent cases' runs, which spend under its budget: the eval's limits as raised. */
export const budgetLimitsSignal = defineSignal<[{ command_id: string; limits: RunBudget }]>('budget_limits');
/**
 * From an eval's agent case to its eval: a model call did not fit the eval's budget under `limits` (the
 * case's run is paused on it). An eval that has been raised since takes no notice: the raise is on its way.
 */
export const caseBudgetExhaustedSignal = defineSignal<[{ case_id: string; limits: RunBudget; shortfall: BudgetShortfall }]>('case_budget_exhausted');
