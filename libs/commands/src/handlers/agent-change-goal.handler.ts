import { rejected } from '../decision';
import type { RunDirectoryPort } from '../ports';
import type { CommandHandler } from './command-handler';
import { updateRun } from './run-access';

export function agentChangeGoalHandler(runs: RunDirectoryPort): CommandHandler<'agent.change_goal'> {
  return (command) =>
    updateRun(runs, command, 'agent', { name: 'change_goal', command_id: command.command_id, goal: command.payload.goal }, (message) =>
      rejected('validator_rejected', message),
    );
}
