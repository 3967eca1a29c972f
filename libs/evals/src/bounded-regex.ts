/**
 * A user's pattern run against an output with a time limit. A pattern with catastrophic backtracking
 * (`(a+)+$`) would otherwise hold the eval worker's event loop for minutes: no heartbeat, every retry
 * stuck the same way, and every other case on that worker stalled with it. `vm`'s timeout interrupts
 * the match itself.
 */
import { createContext, runInContext } from 'node:vm';
import { ScorerOptionError } from './scorer-errors';

export const REGEX_TIME_LIMIT_MS = 250;

// One context for every match: making one costs milliseconds, running in it microseconds.
const sandbox = createContext({ re: undefined as RegExp | undefined, text: '' });

/** `re.exec(text)`, or a ScorerOptionError when it takes longer than `limitMs`. */
export function boundedExec(re: RegExp, text: string, limitMs = REGEX_TIME_LIMIT_MS): RegExpExecArray | null {
  sandbox.re = re;
  sandbox.text = text;
  try {
    return runInContext('re.exec(text)', sandbox, { timeout: limitMs }) as RegExpExecArray | null;
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
      throw new ScorerOptionError(`the pattern /${re.source.slice(0, 80)}/ took longer than ${limitMs} ms on this output (it backtracks without bound); simplify it`);
    }
    throw err;
  } finally {
    sandbox.re = undefined;
    sandbox.text = '';
  }
}
