import type { CommandLedgerPort, OrgBudgetPort, RunDirectoryPort, SnapshotLookupPort } from '../ports';
import { agentCancelHandler } from './agent-cancel.handler';
import { agentChangeGoalHandler } from './agent-change-goal.handler';
import { agentForkHandler } from './agent-fork.handler';
import { agentInjectContextHandler } from './agent-inject-context.handler';
import { agentPauseHandler } from './agent-pause.handler';
import { agentRaiseBudgetHandler, evalRaiseBudgetHandler } from './agent-raise-budget.handler';
import { agentResumeHandler } from './agent-resume.handler';
import { agentStartHandler } from './agent-start.handler';
import type { CommandHandlers } from './command-handler';
import { evalApproveHandler } from './eval-approve.handler';
import { evalCancelHandler } from './eval-cancel.handler';
import { evalRetryFailedHandler } from './eval-retry-failed.handler';
import { evalStartHandler } from './eval-start.handler';
import { RunStarter, type RunStarterDeps } from './run-starter';

export interface CommandHandlerDeps extends RunStarterDeps {
  ledger: CommandLedgerPort;
  runs: RunDirectoryPort;
  snapshots: SnapshotLookupPort;
  /** Orgs' monthly budgets, checked before a run's budget is raised; without it, none. */
  budgets?: OrgBudgetPort;
}

export function createCommandHandlers(deps: CommandHandlerDeps): CommandHandlers {
  const { runs, ledger, snapshots } = deps;
  const starter = new RunStarter(deps);
  return {
    'agent.start': agentStartHandler(starter),
    'agent.pause': agentPauseHandler(runs),
    'agent.resume': agentResumeHandler(runs),
    'agent.cancel': agentCancelHandler(runs),
    'agent.inject_context': agentInjectContextHandler(runs),
    'agent.change_goal': agentChangeGoalHandler(runs),
    'agent.raise_budget': agentRaiseBudgetHandler(runs, deps.budgets),
    'eval.raise_budget': evalRaiseBudgetHandler(runs, deps.budgets),
    'agent.fork': agentForkHandler(snapshots, starter),
    'eval.start': evalStartHandler(starter),
    'eval.cancel': evalCancelHandler(runs),
    'eval.retry_failed': evalRetryFailedHandler({ runs, ledger, starter }),
    'eval.approve': evalApproveHandler(runs),
  };
}
