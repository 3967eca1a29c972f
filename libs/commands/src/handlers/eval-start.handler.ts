import type { CommandHandler } from './command-handler';
import type { RunStarter } from './run-starter';

export function evalStartHandler(starter: RunStarter): CommandHandler<'eval.start'> {
  return (command) => starter.startEval(command.command_id, command.org, command.run_id, command.payload);
}
