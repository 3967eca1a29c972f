/**
 * How the model server answers evals: pure functions of a request's text, so an eval against this server
 * has a score known in advance (README, "How the local model server answers evals").
 *
 * - `[answer: X]` in a prompt is answered with exactly X: outside tests choose a case's answer with it.
 * - The input of a case of a shipped suite is answered right for a seeded subset of the cases and wrong
 *   for the rest (`seededRight`), so the expected score of each suite is a fixed fraction, not 1.
 * - A `[grading]` prompt (the `model_graded` scorer's) is judged by whether the submission contains a target.
 */
import { createHash } from 'node:crypto';
import { loadSuite, normalise, SUITE_NAMES, type SuiteCase, type SuiteName } from '@agentrun/evals';

/** The share of a suite's cases the seeded rule answers right (on average; the exact count is per suite). */
export const RIGHT_FRACTION = 0.7;
/** A wrong answer to a text question: no scorer's target. */
export const DONT_KNOW = 'I do not know';
/** How much of a tool result the agent rule quotes in its answer. */
export const DONE_QUOTE_CHARS = 40;

/** Right iff the first 4 bytes of sha256(`agentrun-evals:<suite>:<case id>`), big-endian, over 2^32 are below 0.7. */
export function seededRight(suite: string, caseId: string): boolean {
  return createHash('sha256').update(`agentrun-evals:${suite}:${caseId}`).digest().readUInt32BE(0) / 2 ** 32 < RIGHT_FRACTION;
}

/** The ids of a shipped suite's cases this server answers right, in file order. */
export function answeredRight(suite: SuiteName): string[] {
  return loadSuite(suite)
    .cases.filter((c) => seededRight(suite, c.id))
    .map((c) => c.id);
}

/**
 * A deterministic wrong answer to a target, one its suite's default scorer scores 0: a number plus one, the
 * next choice letter (A->B, ..., D->A), else `I do not know`.
 */
export function wrongAnswer(target: string): string {
  const t = target.trim();
  if (/^[A-D]$/.test(t)) return 'ABCD'[('ABCD'.indexOf(t) + 1) % 4];
  if (/^-?\d+(\.\d+)?$/.test(t)) return String(Number(t) + 1);
  return DONT_KNOW;
}

/** The answer an `[answer: X]` directive asks for (X trimmed, up to the first `]`), if the text has one. */
export function answerDirective(text: string): string | undefined {
  return /\[answer:([^\]]*)\]/i.exec(text)?.[1].trim();
}

// ---------------------------------------------------------------------------------------------
// Shipped suites, recognised by their input
// ---------------------------------------------------------------------------------------------

export interface ToolRequest {
  tool: string;
  args: Record<string, string | number>;
}

export interface ShippedCase {
  suite: SuiteName;
  solver: 'generate' | 'agent';
  case: SuiteCase;
  right: boolean;
  /** Agent cases: the call the goal names (`metadata.reference_call`). */
  reference?: ToolRequest;
}

/** What a case asks in the last user message: the input, or the last user turn of a chat input. */
function question(c: SuiteCase): string {
  if (typeof c.input === 'string') return c.input.trim();
  return ([...c.input].reverse().find((t) => t.role === 'user')?.content ?? '').trim();
}

function referenceCall(suite: string, c: SuiteCase): ToolRequest {
  const call = c.metadata?.reference_call as { tool?: unknown; args?: unknown } | undefined;
  const args = call?.args;
  const argsOk = typeof args === 'object' && args !== null && Object.values(args).every((v) => typeof v === 'string' || typeof v === 'number');
  if (typeof call?.tool !== 'string' || !argsOk) throw new Error(`${suite} case ${c.id}: metadata.reference_call must be { tool, args }`);
  return { tool: call.tool, args: args as ToolRequest['args'] };
}

let byQuestion: ReadonlyMap<string, ShippedCase> | undefined;

/** Every case of the shipped suites by its question; read once, and the server reads it at start so a missing suite fails there. */
export function shippedCases(): ReadonlyMap<string, ShippedCase> {
  if (byQuestion) return byQuestion;
  const index = new Map<string, ShippedCase>();
  for (const suite of SUITE_NAMES) {
    const { manifest, cases } = loadSuite(suite);
    for (const c of cases) {
      const key = question(c);
      const seen = index.get(key);
      if (seen) throw new Error(`${suite} case ${c.id} asks what ${seen.suite} case ${seen.case.id} asks; the server could not tell them apart`);
      index.set(key, {
        suite,
        solver: manifest.solver,
        case: c,
        right: seededRight(suite, c.id),
        ...(manifest.solver === 'agent' ? { reference: referenceCall(suite, c) } : {}),
      });
    }
  }
  byQuestion = index;
  return index;
}

/** The shipped case whose question is this text (trimmed), if any. */
export function shippedCase(text: string): ShippedCase | undefined {
  return shippedCases().get(text.trim());
}

/** A generate case's reply: its first target verbatim when right, a wrong answer otherwise. */
export function generateAnswer(shipped: ShippedCase): string {
  const first = Array.isArray(shipped.case.target) ? shipped.case.target[0] : shipped.case.target;
  return shipped.right ? first : wrongAnswer(first);
}

/**
 * The tool an agent case's run calls: the one the goal names when right; when wrong, `fetch` (which writes
 * nothing) on the goal's path, or on the first file the case seeds when the call has no path.
 */
export function agentCall(shipped: ShippedCase): ToolRequest {
  const reference = shipped.reference;
  if (!reference) throw new Error(`${shipped.suite} case ${shipped.case.id} is not an agent case`);
  if (shipped.right) return reference;
  const path = reference.args.path ?? Object.keys(shipped.case.files ?? {})[0];
  if (typeof path !== 'string') throw new Error(`${shipped.suite} case ${shipped.case.id}: no path to fetch (no path argument, no seeded file)`);
  return { tool: 'fetch', args: { path } };
}

/** The agent case's answer once its tool result is in. */
export function agentAnswer(toolResult: string): string {
  return `done: ${[...toolResult].slice(0, DONE_QUOTE_CHARS).join('')}`;
}

// ---------------------------------------------------------------------------------------------
// The judge of the `model_graded` scorer
// ---------------------------------------------------------------------------------------------

export interface Grading {
  question: string;
  /** One acceptable answer per line, blank lines left out. */
  targets: string[];
  submission: string;
  rubric: string;
}

export const GRADING_MARK = '[grading]';
const GRADING =
  /^\[grading\]\n<question>\n([\s\S]*?)\n<\/question>\n<target>\n([\s\S]*?)\n<\/target>\n<submission>\n([\s\S]*)\n<\/submission>\n<rubric>\n([\s\S]*?)\n<\/rubric>(?:\n|$)/;

/**
 * The sections of a grading prompt; undefined when the text is not one (does not start with `[grading]`),
 * a string saying what is wrong when it starts like one but is malformed.
 */
export function readGrading(text: string): Grading | string | undefined {
  if (!text.startsWith(GRADING_MARK)) return undefined;
  const m = GRADING.exec(text.replace(/\r\n/g, '\n'));
  if (!m) {
    return 'a [grading] prompt must hold <question>, <target>, <submission> and <rubric> sections in that order, each tag on its own line';
  }
  const [, q, targets, submission, rubric] = m;
  return { question: q, targets: targets.split('\n').filter((t) => t.trim() !== ''), submission, rubric };
}

/** C when the normalised submission contains a normalised target line, else I. */
export function judge(grading: Grading): string {
  const submission = normalise(grading.submission);
  const hit = grading.targets.find((t) => submission.includes(normalise(t)));
  return hit !== undefined ? `The submission contains '${hit.trim()}'.\nGRADE: C` : 'The submission does not contain any target.\nGRADE: I';
}
