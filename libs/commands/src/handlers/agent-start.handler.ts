import type { CommandHandler } from './command-handler';
import type { RunStarter } from './run-starter';

export function agentStartHandler(starter: RunStarter): CommandHandler<'agent.start'> {
  return (command) => starter.startAgent(command.command_id, command.org, command.run_id, command.payload);
}
