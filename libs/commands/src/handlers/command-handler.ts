import type { CommandOf, CommandType } from '@agentrun/contracts';
import type { CommandDecision } from '../decision';

/** Decides one command of type `T`. Throws `TransientCommandError` when it could not decide. */
export type CommandHandler<T extends CommandType> = (command: CommandOf<T>) => Promise<CommandDecision>;

/** One handler per command type: a type without a handler does not compile. */
export type CommandHandlers = { [T in CommandType]: CommandHandler<T> };
