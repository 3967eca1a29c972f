/**
 * Scoring one case: every scorer of the eval over the case's output, in the order the eval names them.
 * The two scorers that need the outside world get it as arguments: `files` a WorkspaceReader over the
 * agent's workspace, `model_graded` a Judge that sends chat messages to a model. Their failures are not
 * caught here: the caller knows whether a failed judge is the platform's fault or the eval's.
 */
import { caseText, type ChatTurn, type EvalCase } from './dataset';
import { compileJsonSchema, EvalSpecError, parseFileChecks, type FileCheck, type ScorerSpec } from './registry';
import { boundedExec } from './bounded-regex';
import { choice, exact, includes, json, numeric, regex, ScorerOptionError, type Score, type Target } from './scorers';

/** Reads a file of the agent's workspace as text; undefined when there is no such file. */
export interface WorkspaceReader {
  read(path: string): Promise<string | undefined>;
}

/** The judge model a `model_graded` scorer asked for; the caller's defaults apply to what is absent. */
export interface JudgeOptions {
  model?: string;
  endpoint?: string;
}

/** Sends chat messages to a judge model and returns its reply; throws when the call fails. */
export type Judge = (messages: ChatTurn[], options: JudgeOptions) => Promise<string>;

export interface ScoreSubject {
  input: EvalCase['input'];
  target: Target;
  /** The solver's final answer; absent or blank when it gave none. */
  output?: string | null;
  /** The case's metadata: `metadata.checks` are the `files` scorer's checks when its options have none. */
  metadata?: Record<string, unknown>;
  workspace?: WorkspaceReader;
}

/** The output is empty or absent, and a scorer needs to read it. */
export class UnreadableOutputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnreadableOutputError';
  }
}

/** The judge replied, but with no `GRADE: C|P|I` line. `reply` is its text (clipped). */
export class UnreadableJudgeError extends Error {
  readonly reply: string;

  constructor(reply: string) {
    super(`the judge's reply has no 'GRADE: C', 'GRADE: P' or 'GRADE: I' line: '${clip(reply, 200)}'`);
    this.name = 'UnreadableJudgeError';
    this.reply = clip(reply, MAX_EXPLANATION_CHARS);
  }
}

export const DEFAULT_RUBRIC = 'The submission is correct if it states the target answer; extra words are fine.';
export const MAX_EXPLANATION_CHARS = 2000;
const GRADE_VALUES = { C: 1, P: 0.5, I: 0 } as const;

/** Every scorer's score for one case, in the order of `specs`. */
export async function scoreCase(specs: ScorerSpec[], subject: ScoreSubject, judge?: Judge): Promise<Score[]> {
  const output = subject.output ?? '';
  // Only `files` scores without reading the output, so an agent that answers nothing but leaves the
  // right files is still scored; any other scorer would be scoring nothing.
  if (output.trim().length === 0 && specs.some((s) => s.name !== 'files')) {
    throw new UnreadableOutputError(`the output is ${subject.output == null ? 'absent' : 'empty'}: no scorer can read it`);
  }
  const scores: Score[] = [];
  for (const spec of specs) scores.push(await scoreOne(spec, { ...subject, output }, judge));
  return scores;
}

async function scoreOne(spec: ScorerSpec, subject: ScoreSubject & { output: string }, judge: Judge | undefined): Promise<Score> {
  const { output, target } = subject;
  switch (spec.name) {
    case 'exact':
      return exact(output, answers(spec.name, target));
    case 'includes':
      return includes(output, answers(spec.name, target));
    case 'regex':
      return regex(output, spec.pattern, spec.flags);
    case 'numeric':
      return numeric(output, answers(spec.name, target), spec.tolerance ?? 0);
    case 'choice':
      return choice(output, answers(spec.name, target));
    case 'json':
      return json(output, [], spec.schema ? compileJsonSchema(spec.schema) : undefined);
    case 'files':
      return filesScore(spec.checks ?? checksOf(subject.metadata), subject.workspace);
    case 'model_graded': {
      if (!judge) throw new ScorerOptionError('model_graded: no judge is configured to grade with');
      const reply = await judge([{ role: 'user', content: gradingPrompt(subject.input, answers(spec.name, target), output, spec.rubric) }], judgeOptions(spec));
      return { scorer: 'model_graded', ...readGrade(reply) };
    }
    default: {
      const unreachable: never = spec;
      throw new ScorerOptionError(`unknown scorer '${(unreachable as { name: string }).name}'`);
    }
  }
}

/** The acceptable answers, refusing the empty target only files-checked cases may have: every answer would match it. */
function answers(scorer: string, target: Target): Target {
  const list = Array.isArray(target) ? target : [target];
  if (!list.some((t) => t.trim().length > 0)) {
    throw new ScorerOptionError(`${scorer}: the case's target is empty, so only the 'files' scorer can score it`);
  }
  return target;
}

// ---------------------------------------------------------------------------------------------
// files
// ---------------------------------------------------------------------------------------------

function checksOf(metadata: Record<string, unknown> | undefined): FileCheck[] {
  if (metadata?.checks === undefined) {
    throw new ScorerOptionError("files: no file checks: give the scorer 'checks' or the case 'metadata.checks'");
  }
  try {
    return parseFileChecks(metadata.checks, 'metadata.checks');
  } catch (err) {
    if (err instanceof EvalSpecError) throw new ScorerOptionError(`files: ${err.message}`);
    throw err;
  }
}

/** The fraction of checks the workspace passes; the explanation names each failure. */
async function filesScore(checks: FileCheck[], workspace: WorkspaceReader | undefined): Promise<Score> {
  if (!workspace) throw new ScorerOptionError('files: there is no workspace to check (the solver leaves none)');
  const texts = new Map<string, Promise<string | undefined>>();
  const read = (path: string): Promise<string | undefined> => {
    let text = texts.get(path);
    if (!text) texts.set(path, (text = workspace.read(path)));
    return text;
  };
  const failures: string[] = [];
  for (const check of checks) {
    const failure = checkFailure(check, await read(check.path));
    if (failure) failures.push(failure);
  }
  const passed = checks.length - failures.length;
  return {
    scorer: 'files',
    value: passed / checks.length,
    explanation: failures.length === 0 ? `all ${checks.length} file checks passed` : clip(`${passed} of ${checks.length} file checks passed: ${failures.join('; ')}`, MAX_EXPLANATION_CHARS),
  };
}

function checkFailure(check: FileCheck, text: string | undefined): string | undefined {
  if (check.exists === false) return text === undefined ? undefined : `${check.path} exists and must not`;
  if (text === undefined) return `${check.path} is missing`;
  if (check.contains !== undefined && !text.includes(check.contains)) return `${check.path} does not contain '${clip(check.contains, 80)}'`;
  if (check.matches !== undefined && !boundedExec(new RegExp(check.matches), text)) return `${check.path} does not match /${clip(check.matches, 80)}/`;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// model_graded
// ---------------------------------------------------------------------------------------------

/**
 * The one user message the judge gets. Byte-exact: the local model server recognises it by its first
 * line and reads its sections, so any change here is a change to that server's rule too.
 */
export function gradingPrompt(input: EvalCase['input'], target: Target, output: string, rubric: string = DEFAULT_RUBRIC): string {
  return [
    '[grading]',
    '<question>',
    caseText(input),
    '</question>',
    '<target>',
    ...(Array.isArray(target) ? target : [target]),
    '</target>',
    '<submission>',
    output,
    '</submission>',
    '<rubric>',
    rubric,
    '</rubric>',
    'Explain briefly, then end with one line: GRADE: C (correct), GRADE: P (partly correct) or GRADE: I (incorrect).',
  ].join('\n');
}

/** The LAST grade in the reply counts: a judge may quote the instruction's grades before giving its own. */
export function readGrade(reply: string): { value: number; explanation: string } {
  const grades = [...reply.matchAll(/GRADE:\s*([CPI])(?![A-Za-z])/g)];
  if (grades.length === 0) throw new UnreadableJudgeError(reply);
  const grade = grades[grades.length - 1][1] as keyof typeof GRADE_VALUES;
  return { value: GRADE_VALUES[grade], explanation: clip(reply.trim(), MAX_EXPLANATION_CHARS) };
}

function judgeOptions(spec: { model?: string; endpoint?: string }): JudgeOptions {
  const options: JudgeOptions = {};
  if (spec.model !== undefined) options.model = spec.model;
  if (spec.endpoint !== undefined) options.endpoint = spec.endpoint;
  return options;
}

/**
 * A case's score: the mean of its scorers' values, to 3 decimals. Summed in ascending order, so the same
 * scores give the same score whatever order the eval names its scorers in (float addition is not
 * associative: 0.3 + 0.4 + 0.5 + 0.5 + 1 in one order is 2.7, in another 2.6999999999999997, and a mean
 * of 0.3375 rounded to 0.338 or 0.337).
 */
export function caseScore(scores: Score[]): number {
  if (scores.length === 0) throw new RangeError('a case score needs at least one score');
  const mean = scores
    .map((s) => s.value)
    .sort((a, b) => a - b)
    .reduce((sum, v) => sum + v, 0) / scores.length;
  return Math.round(mean * 1000) / 1000;
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
