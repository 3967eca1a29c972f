/**
 * Scorers: pure functions from a case's output and target to a score with its explanation. The ones
 * that need the outside world (`files` reads a workspace, `model_graded` calls a judge) are in
 * score.ts, which runs an eval's scorers over a case; these need nothing but their arguments.
 */

import { boundedExec } from './bounded-regex';
import { ScorerOptionError } from './scorer-errors';

export { ScorerOptionError };

/** What one scorer says about one case. */
export interface Score {
  scorer: string;
  /** 0..1 */
  value: number;
  explanation: string;
}

/** A case's target: one acceptable answer or several. */
export type Target = string | string[];

const targets = (target: Target): string[] => (Array.isArray(target) ? target : [target]);

/** Case and surrounding whitespace do not count; inner whitespace runs count as one space. */
export function normalise(text: string): string {
  return text.trim().replace(/\s+/g, ' ').toLowerCase();
}

export function exact(output: string, target: Target): Score {
  const hit = targets(target).find((t) => normalise(t) === normalise(output));
  return { scorer: 'exact', value: hit !== undefined ? 1 : 0, explanation: hit !== undefined ? `the output is '${hit}'` : `the output '${clip(output)}' is none of ${list(target)}` };
}

export function includes(output: string, target: Target): Score {
  const hit = targets(target).find((t) => normalise(output).includes(normalise(t)));
  return { scorer: 'includes', value: hit !== undefined ? 1 : 0, explanation: hit !== undefined ? `the output contains '${hit}'` : `the output contains none of ${list(target)}` };
}

export function regex(output: string, pattern: string, flags = 'i'): Score {
  let re: RegExp;
  try {
    re = new RegExp(pattern, flags);
  } catch (err) {
    throw new ScorerOptionError(`regex: '${pattern}' is not a regular expression (${(err as Error).message})`);
  }
  const m = boundedExec(re, output);
  return { scorer: 'regex', value: m ? 1 : 0, explanation: m ? `'${clip(m[0])}' matches /${pattern}/${flags}` : `nothing matches /${pattern}/${flags}` };
}

/** The last number in the output against the target number, within an absolute tolerance. */
export function numeric(output: string, target: Target, tolerance = 0): Score {
  const numbers = output.replace(/(\d),(?=\d{3}\b)/g, '$1').match(/-?\d+(?:\.\d+)?(?:e[-+]?\d+)?/gi);
  const got = numbers ? Number(numbers[numbers.length - 1]) : undefined;
  if (got === undefined || !Number.isFinite(got)) return { scorer: 'numeric', value: 0, explanation: 'the output has no number' };
  for (const t of targets(target)) {
    const want = Number(t);
    if (!Number.isFinite(want)) throw new ScorerOptionError(`numeric: the target '${t}' is not a number`);
    if (Math.abs(got - want) <= tolerance) return { scorer: 'numeric', value: 1, explanation: `${got} is ${want}${tolerance ? ` within ${tolerance}` : ''}` };
  }
  return { scorer: 'numeric', value: 0, explanation: `${got} is not ${list(target)}${tolerance ? ` within ${tolerance}` : ''}` };
}

/**
 * Multiple choice: the letter the output settles on (`B`, `(B)`, `B.`, `answer: B`, the last one when
 * it names several) against the target letter.
 */
export function choice(output: string, target: Target): Score {
  const letters = [...output.toUpperCase().matchAll(/(?:^|[^A-Z])([A-Z])(?=$|[^A-Z])/g)].map((m) => m[1]);
  const got = letters[letters.length - 1];
  if (!got) return { scorer: 'choice', value: 0, explanation: 'the output names no choice' };
  const wanted = targets(target).map((t) => t.trim().toUpperCase());
  return { scorer: 'choice', value: wanted.includes(got) ? 1 : 0, explanation: wanted.includes(got) ? `chose ${got}` : `chose ${got}, not ${wanted.join(' or ')}` };
}

/**
 * Valid JSON (fenced too) whose value has every key of `required` (a shallow check) and, given `check`
 * (a compiled JSON Schema from the scorer's options), passes it.
 */
export function json(output: string, required: string[] = [], check?: (value: unknown) => string | undefined): Score {
  let value: unknown;
  try {
    value = JSON.parse(output.trim().replace(/^```(?:json)?\s*|\s*```$/g, ''));
  } catch (err) {
    return { scorer: 'json', value: 0, explanation: `not JSON: ${(err as Error).message}` };
  }
  const missing = required.filter((k) => !(value && typeof value === 'object' && k in (value as Record<string, unknown>)));
  if (missing.length) return { scorer: 'json', value: 0, explanation: `JSON without ${missing.join(', ')}` };
  const problem = check?.(value);
  if (problem !== undefined) return { scorer: 'json', value: 0, explanation: `JSON that fails the schema: ${problem}` };
  return { scorer: 'json', value: 1, explanation: check ? 'valid JSON that matches the schema' : 'valid JSON with every required key' };
}


function clip(text: string, max = 80): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function list(target: Target): string {
  return targets(target)
    .map((t) => `'${clip(t, 40)}'`)
    .join(', ');
}
