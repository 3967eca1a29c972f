import type { RunDirectoryPort } from '../ports';
import type { CommandHandler } from './command-handler';
import { signalRun } from './run-access';

export function agentInjectContextHandler(runs: RunDirectoryPort): CommandHandler<'agent.inject_context'> {
  return (command) => signalRun(runs, command, 'agent', { name: 'inject_context', command_id: command.command_id, text: command.payload.text });
}
