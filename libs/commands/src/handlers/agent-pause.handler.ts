import type { RunDirectoryPort } from '../ports';
import type { CommandHandler } from './command-handler';
import { signalRun } from './run-access';

export function agentPauseHandler(runs: RunDirectoryPort): CommandHandler<'agent.pause'> {
  return (command) => signalRun(runs, command, 'agent', { name: 'pause', command_id: command.command_id });
}
