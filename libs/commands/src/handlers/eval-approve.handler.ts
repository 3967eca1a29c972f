import { rejected } from '../decision';
import type { RunDirectoryPort } from '../ports';
import type { CommandHandler } from './command-handler';
import { updateRun } from './run-access';

export function evalApproveHandler(runs: RunDirectoryPort): CommandHandler<'eval.approve'> {
  return (command) =>
    updateRun(runs, command, 'eval', { name: 'approve', command_id: command.command_id, reviewer: command.payload.reviewer }, (message) =>
      // The run's validator prefixes a refusal of an unknown reviewer with the reason's name.
      message.startsWith('not_a_reviewer')
        ? rejected('not_a_reviewer', message.replace(/^not_a_reviewer: /, ''))
        : rejected('validator_rejected', message),
    );
}
