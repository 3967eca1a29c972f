/** What a probe returns while its condition does not hold yet. */
export type NotYet = undefined | null | false | 0 | '';

/**
 * Polls `probe` every `everyMs` until it returns a value that counts as done, and resolves with that
 * value; rejects after `timeoutMs` otherwise.
 *
 * The rule, for the value: any falsy value (`undefined`, `null`, `false`, `0`, `''`, `NaN`) means
 * "not yet", every other value means done. So a probe may return a row it found (`find` gives
 * `undefined` until it is there, a query's `rows[0]?.x` may give `null`) or a count that must become
 * positive; a probe whose answer may legitimately be 0, null or empty returns it wrapped (`{ n }`).
 *
 * The rule, for an error the probe throws:
 * - a bug in the test fails the wait at once, with that error: a failed `expect` (jest's assertion
 *   error carries `matcherResult`; node:assert's has code `ERR_ASSERTION`), a `ReferenceError`, or a
 *   `TypeError` other than undici's network errors (`fetch failed`, `terminated`): reading a property
 *   of undefined is not something to wait out;
 * - anything else (a refused connection, `fetch failed`, a pg, kafkajs or Temporal error, an HTTP
 *   helper's own error) is taken as transient and retried; if the wait times out, its message names
 *   the last such error.
 *
 * - a `Settled` error: the probe saw that the condition can no longer come true (a run that reached
 *   another terminal status), so the wait ends at once with what it saw instead of at its timeout.
 *
 * Errors are told apart by name and properties, not `instanceof`: under jest, errors made by Node
 * itself (fetch's) come from another realm than the test's `TypeError`.
 */
export async function waitFor<T>(what: string, probe: () => T | Promise<T>, timeoutMs = 60_000, everyMs = 100): Promise<Exclude<T, NotYet>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  let lastValue: unknown;
  let polls = 0;
  for (;;) {
    polls += 1;
    try {
      const value = await probe();
      if (value) return value as Exclude<T, NotYet>;
      lastValue = value;
    } catch (err) {
      if (isTestBug(err)) throw err;
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError === undefined ? `the probe last returned ${describeValue(lastValue)}` : `the last error was ${describeError(lastError)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (${polls} polls; ${why})`);
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Thrown by a probe that saw its condition can no longer hold: `waitFor` rethrows it at once. */
export class Settled extends Error {
  readonly settled = true;
  override name = 'Settled';
}

/** Errors no amount of waiting fixes: a failed expectation, a misspelt name, a property read of nothing. */
export function isTestBug(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { name?: unknown; message?: unknown; matcherResult?: unknown; code?: unknown; settled?: unknown };
  if (e.matcherResult !== undefined || e.code === 'ERR_ASSERTION' || e.settled === true) return true;
  if (e.name === 'ReferenceError') return true;
  if (e.name === 'TypeError') return !(e.message === 'fetch failed' || e.message === 'terminated');
  return false;
}

function describeError(err: unknown): string {
  if (typeof err !== 'object' || err === null) return String(err);
  const e = err as { name?: string; message?: string; code?: unknown; cause?: unknown };
  const cause = e.cause as { code?: unknown; message?: string } | undefined;
  const causeText = cause ? ` (cause: ${cause.code ?? cause.message ?? String(cause)})` : '';
  return `${e.name ?? 'Error'}${e.code !== undefined ? ` [${String(e.code)}]` : ''}: ${e.message ?? String(err)}${causeText}`;
}

function describeValue(value: unknown): string {
  if (value === undefined || typeof value === 'number') return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
