import { setHandler, workflowInfo } from '@temporalio/workflow';
import { MAX_GOAL_CHARS } from '@agentrun/contracts';
import type { AgentLoopState } from './agent-run.state';
import type { RunLifecycle } from './agent-run.lifecycle';
import { budgetLimitsSignal, cancelRunSignal, changeGoalUpdate, injectContextSignal, pauseSignal, raiseBudgetUpdate, resumeSignal, statusQuery } from './definitions';
import type { Outbox } from './outbox';
import type { SeriesSlot } from './workspace-hosts';


/**
 * Refuses a goal change before it is accepted (goals bounded in code points, as the schema at the
 * boundary counts them: an emoji is one, not two UTF-16 units): a refused Update never reaches history. A goal a
 * start accepts must not be refused here.
 */
export function validateGoalChange(run: Pick<AgentLoopState, 'settling' | 'status'>, { command_id, goal }: { command_id: string; goal: string }): void {
  if (typeof goal !== 'string' || goal.trim() === '') throw new Error('goal must not be empty');
  if ([...goal].length > MAX_GOAL_CHARS) throw new Error(`goal must be at most ${MAX_GOAL_CHARS} characters`);
  if (!command_id) throw new Error('command_id is required');
  if (run.settling()) throw new Error(`the run is ${run.status}; its goal can no longer change`);
}

/**
 * Refuses a budget raise before it is accepted: at least one limit, each a positive number (tokens a
 * whole one), each higher than the run's current limit of that kind. A run with no limit of a kind
 * takes any. Whether the org's monthly budget allows it is checked before the Update is sent.
 */
export function validateBudgetRaise(run: Pick<AgentLoopState, 'settling' | 'spendLimit'> & { status: string }, { command_id, max_tokens, max_cost_usd }: { command_id: string; max_tokens?: number; max_cost_usd?: number }): void {
  if (!command_id) throw new Error('command_id is required');
  if (max_tokens === undefined && max_cost_usd === undefined) throw new Error('give max_tokens, max_cost_usd or both');
  if (max_tokens !== undefined && (!Number.isSafeInteger(max_tokens) || max_tokens < 1)) throw new Error('max_tokens must be a positive whole number');
  if (max_cost_usd !== undefined && (typeof max_cost_usd !== 'number' || !Number.isFinite(max_cost_usd) || max_cost_usd <= 0)) throw new Error('max_cost_usd must be a positive number');
  if (run.settling()) throw new Error(`the run is ${run.status}; its budget can no longer change`);
  const current = run.spendLimit ?? {};
  if (max_tokens !== undefined && current.max_tokens !== undefined && max_tokens <= current.max_tokens) {
    throw new Error(`max_tokens must be higher than the run's current ${current.max_tokens}`);
  }
  if (max_cost_usd !== undefined && current.max_cost_usd !== undefined && max_cost_usd <= current.max_cost_usd) {
    throw new Error(`max_cost_usd must be higher than the run's current ${current.max_cost_usd}`);
  }
}

/**
 * The run's Signals, Update and Query. Each control is applied once per command id and ignored once
 * the run is settling; the handlers change state and publish, the loop acts on it at its next turn.
 * A run that spends under another run's budget (`budgetRunId`: an eval's agent case) takes its limits
 * from that run's raises (`budgetLimitsSignal`), not a raise of its own.
 */
export function registerAgentRunHandlers(run: AgentLoopState, lifecycle: RunLifecycle, outbox: Outbox, slot: SeriesSlot, budgetRunId?: string): void {
  setHandler(pauseSignal, ({ command_id }) => {
    if (!run.firstTime(command_id) || run.paused || run.settling() || run.status !== 'running') return;
    lifecycle.pause(command_id);
  });
  setHandler(resumeSignal, ({ command_id }) => {
    if (!run.firstTime(command_id) || !run.paused || run.settling()) return;
    lifecycle.resume(command_id);
  });
  setHandler(cancelRunSignal, ({ command_id }) => {
    if (!run.firstTime(command_id) || run.settling()) return;
    lifecycle.requestCancel(command_id);
  });
  setHandler(injectContextSignal, ({ command_id, text }) => {
    if (!run.firstTime(command_id) || run.settling()) return;
    run.context = `${run.context}\n[injected: ${text}]`;
    outbox.emit('context_injected', { command_id, text });
  });
  setHandler(
    changeGoalUpdate,
    ({ command_id, goal }) => {
      if (!run.firstTime(command_id)) return `ignored: command ${command_id} already applied`;
      const previous = run.goal;
      run.goal = goal;
      run.context = `${run.context}\n[goal changed: ${goal}]`;
      outbox.emit('goal_changed', { command_id, previous_goal: previous });
      return `goal changed from '${previous}' to '${goal}'`;
    },
    { validator: (change) => validateGoalChange(run, change) },
  );
  setHandler(
    raiseBudgetUpdate,
    ({ command_id, max_tokens, max_cost_usd }) => {
      if (!run.firstTime(command_id)) return `ignored: command ${command_id} already applied`;
      const limits = { ...(max_tokens !== undefined ? { max_tokens } : {}), ...(max_cost_usd !== undefined ? { max_cost_usd } : {}) };
      const resuming = run.budgetPaused;
      lifecycle.budgetRaised(command_id, limits);
      return `budget raised to ${JSON.stringify(run.spendLimit)}${resuming ? '; the run goes on' : ''}`;
    },
    {
      validator: (raise) => {
        if (budgetRunId) throw new Error(`this run spends under run ${budgetRunId}'s budget: raise that run's budget instead`);
        validateBudgetRaise(run, raise);
      },
    },
  );
  setHandler(budgetLimitsSignal, ({ command_id, limits }) => {
    if (!budgetRunId || !run.firstTime(command_id) || run.settling()) return;
    lifecycle.budgetRaised(command_id, limits);
  });
  setHandler(statusQuery, () => {
    const info = workflowInfo();
    return run.statusView(info, outbox.seq(), slot.series?.rows());
  });
}
