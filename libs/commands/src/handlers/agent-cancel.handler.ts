import type { RunDirectoryPort } from '../ports';
import type { CommandHandler } from './command-handler';
import { signalRun } from './run-access';

export function agentCancelHandler(runs: RunDirectoryPort): CommandHandler<'agent.cancel'> {
  return (command) => signalRun(runs, command, 'agent', { name: 'cancel_run', command_id: command.command_id });
}
