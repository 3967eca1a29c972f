/** Temporal could not be reached or was busy: nothing was decided, so the caller retries later. */
export class TransientCommandError extends Error {
  override readonly name = 'TransientCommandError';
}

/** The run directory has no workflow under that id (never started, or forgotten after its retention). */
export class RunNotFoundError extends Error {
  override readonly name = 'RunNotFoundError';
}

/** A workflow with that id exists or existed: the id is taken. */
export class RunAlreadyStartedError extends Error {
  override readonly name = 'RunAlreadyStartedError';
}

/** The run's update validator refused the request; the message is the validator's own. */
export class UpdateRefusedError extends Error {
  override readonly name = 'UpdateRefusedError';
}

/**
 * Whether an error reads as a dependency out of reach rather than a bad command. Messages are all we
 * have for errors raised below the ports (socket resets, driver timeouts).
 */
export function looksUnreachable(err: unknown): boolean {
  const message = err instanceof Error ? err.message : String(err);
  return /ECONNREFUSED|ECONNRESET|UNAVAILABLE|DEADLINE_EXCEEDED|connection|transport|timed? ?out/i.test(message);
}
