import type { RunDirectoryPort } from '../ports';
import type { CommandHandler } from './command-handler';
import { signalRun } from './run-access';

export function evalCancelHandler(runs: RunDirectoryPort): CommandHandler<'eval.cancel'> {
  return (command) => signalRun(runs, command, 'eval', { name: 'cancel_eval', command_id: command.command_id });
}
