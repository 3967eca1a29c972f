import type { RunDirectoryPort } from '../ports';
import type { CommandHandler } from './command-handler';
import { signalRun } from './run-access';

export function agentResumeHandler(runs: RunDirectoryPort): CommandHandler<'agent.resume'> {
  return (command) => signalRun(runs, command, 'agent', { name: 'resume', command_id: command.command_id });
}
