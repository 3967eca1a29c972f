import { rejected } from '../decision';
import type { OrgBudgetPort, RunDirectoryPort } from '../ports';
import type { CommandHandler } from './command-handler';
import { updateRun } from './run-access';

/**
 * Raises a run's limits through its Update (whose validator refuses a limit that is not higher), after
 * checking what the workflow cannot look up: the org's monthly budget must allow it. A run may not be
 * given more dollars than its org's whole month, nor more at all once the org's month is spent.
 */
export function agentRaiseBudgetHandler(runs: RunDirectoryPort, budgets: OrgBudgetPort | undefined): CommandHandler<'agent.raise_budget'> {
  return raiseBudgetHandler(runs, budgets, 'agent');
}

/** `eval.raise_budget`: the same for an eval, whose cases wait while it is paused on its budget. */
export function evalRaiseBudgetHandler(runs: RunDirectoryPort, budgets: OrgBudgetPort | undefined): CommandHandler<'eval.raise_budget'> {
  return raiseBudgetHandler(runs, budgets, 'eval');
}

function raiseBudgetHandler<T extends 'agent.raise_budget' | 'eval.raise_budget'>(runs: RunDirectoryPort, budgets: OrgBudgetPort | undefined, kind: 'agent' | 'eval'): CommandHandler<T> {
  return async (command) => {
    const { max_tokens, max_cost_usd } = command.payload;
    const org = await budgets?.standing(command.org);
    if (org) {
      if (max_cost_usd !== undefined && max_cost_usd > org.monthly_usd) {
        return rejected('validator_rejected', `max_cost_usd ${max_cost_usd} is more than org ${command.org}'s monthly budget of $${org.monthly_usd}`);
      }
      const left = org.monthly_usd - org.spent_usd - org.reserved_usd;
      if (left <= 0) {
        return rejected('validator_rejected', `org ${command.org}'s monthly budget of $${org.monthly_usd} is spent ($${org.spent_usd}); raise it first (npm run budget -- set)`);
      }
    }
    return updateRun(
      runs,
      command,
      kind,
      { name: 'raise_budget', command_id: command.command_id, ...(max_tokens !== undefined ? { max_tokens } : {}), ...(max_cost_usd !== undefined ? { max_cost_usd } : {}) },
      (message) => rejected('validator_rejected', message),
    );
  };
}
