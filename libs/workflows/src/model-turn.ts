import { ActivityFailure, ApplicationFailure, sleep } from '@temporalio/workflow';
import { RATE_LIMIT_WAIT } from './agent-run.types';

/** How long a `RateLimitWait` failure says to wait, and the attempt its activity got to; undefined for any other failure. */
export function rateLimitWaitOf(err: unknown): { wait_ms: number; attempt: number } | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (!(cause instanceof ApplicationFailure) || cause.type !== RATE_LIMIT_WAIT) return undefined;
  const details = cause.details?.[0] as { wait_ms?: unknown; attempt?: unknown } | undefined;
  const wait = typeof details?.wait_ms === 'number' && Number.isFinite(details.wait_ms) ? details.wait_ms : 1_000;
  const attempt = typeof details?.attempt === 'number' && Number.isSafeInteger(details.attempt) && details.attempt > 0 ? details.attempt : 1;
  return { wait_ms: Math.min(60_000, Math.max(1, Math.ceil(wait))), attempt };
}

/**
 * Makes a model call, waiting its turn under the model's shared rate limits: each time the call is
 * told to wait, a durable timer holds the run (no worker slot, no activity in flight), then the call is
 * made again as a new activity, told how many attempts came before it (`call(attemptsBefore)`).
 */
export async function inTurn<T>(call: (attemptsBefore: number) => Promise<T>): Promise<T> {
  let attemptsBefore = 0;
  for (;;) {
    try {
      return await call(attemptsBefore);
    } catch (err) {
      const wait = rateLimitWaitOf(err);
      if (wait === undefined) throw err;
      attemptsBefore += wait.attempt;
      await sleep(wait.wait_ms);
    }
  }
}
