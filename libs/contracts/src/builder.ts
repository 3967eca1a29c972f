import type { CommandOf, CommandPayloads, CommandType } from './commands';
import { MAX_COMMAND_BYTES } from './names';
import { checkCommand } from './validation';

/** Why a command could not be built; thrown before anything is sent, naming what is wrong. */
export class CommandBuildError extends Error {
  override readonly name = 'CommandBuildError';
  constructor(
    /** `invalid_payload`, `unknown_type`, `not_a_command` or `too_large`, as the consumer would have answered. */
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

export interface CommandParts<T extends CommandType> {
  org: string;
  run_id: string;
  /** Chosen by the caller for idempotency; a random UUID when absent. Sending the same id twice is one command. */
  command_id?: string;
  payload: CommandPayloads[T];
}

/** A record ready for any Kafka producer: send `key` and `value` to `agentrun.commands.v1`. */
export interface BuiltCommand<T extends CommandType> {
  key: string;
  value: string;
  command: CommandOf<T>;
}

/**
 * Builds a command and checks it exactly as the orchestrator will, so a command that would be
 * dead-lettered or rejected fails here, in the sender's process, instead.
 */
export function buildCommand<T extends CommandType>(type: T, parts: CommandParts<T>): BuiltCommand<T> {
  const command = { command_id: parts.command_id ?? globalThis.crypto.randomUUID(), type, org: parts.org, run_id: parts.run_id, payload: parts.payload };
  const value = JSON.stringify(command);
  const bytes = new TextEncoder().encode(value).length;
  if (bytes > MAX_COMMAND_BYTES) throw new CommandBuildError('too_large', `the command is ${bytes} bytes; the limit is ${MAX_COMMAND_BYTES}`);
  const reading = checkCommand(JSON.parse(value));
  if (reading.kind === 'unreadable') throw new CommandBuildError(reading.reason, reading.detail);
  if (reading.kind === 'rejected') throw new CommandBuildError(reading.reason, reading.message);
  // What the check read, not what was passed: the org normalised as the consumer would, so the sender
  // records the same org the outcome will name. Lowercasing keeps the length, so the size check holds.
  const checked = reading.command as CommandOf<T>;
  return { key: checked.run_id, value: JSON.stringify(checked), command: checked };
}
