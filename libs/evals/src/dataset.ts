/**
 * Eval datasets: the case shape, its checks, JSONL parsing with line numbers, and the dataset's id.
 * A dataset given inline, uploaded as JSONL or shipped as a suite goes through `parseCase`, so all three
 * accept the same cases and refuse the same mistakes with the same sentences.
 *
 * Decisions the checks encode:
 * - `target` is a non-empty string or 1..50 non-empty strings. The one exception is `""` on a case that
 *   is checked by its files (it has `files` or `metadata.checks`): an agent case may have nothing to say
 *   and everything to leave in its workspace.
 * - `input` given as chat turns ends with a user turn: the solver asks the model to answer it.
 * - `metadata` is free-form JSON, except `metadata.checks`, which the `files` scorer reads and which is
 *   therefore checked here as file checks, so a bad check fails the upload and not every case's score.
 * - Sizes are UTF-8 bytes; text that Postgres cannot store (NUL, a lone surrogate) is refused.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical';
import { workspacePathProblem } from './paths';
import { EvalSpecError, parseFileChecks } from './registry';

export interface ChatTurn {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface EvalCase {
  id: string;
  input: string | ChatTurn[];
  target: string | string[];
  metadata?: Record<string, unknown>;
  /** Workspace path -> text, written into an agent case's workspace before it runs. */
  files?: Record<string, string>;
}

export const CASE_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$';
export const MAX_INPUT_BYTES = 64 * 1024;
export const MAX_TURNS = 100;
export const MAX_TARGETS = 50;
export const MAX_TARGET_BYTES = 64 * 1024;
export const MAX_METADATA_BYTES = 64 * 1024;
export const MAX_METADATA_DEPTH = 32;
export const MAX_FILES = 200;
export const MAX_FILE_BYTES = 1024 * 1024;
export const DEFAULT_MAX_CASES = 10_000;

const CASE_KEYS = ['id', 'input', 'target', 'metadata', 'files'];
const ROLES = ['system', 'user', 'assistant'];
const caseIdRe = new RegExp(CASE_ID_PATTERN);

/** A dataset or one of its cases is not a valid eval dataset. `line` is the 1-based JSONL line, when there is one. */
export class DatasetError extends Error {
  readonly line?: number;

  constructor(message: string, line?: number) {
    super(message);
    this.name = 'DatasetError';
    if (line !== undefined) this.line = line;
  }
}

/** What is wrong with a case, before it is known where the case came from. */
class CaseProblem extends Error {}

/** One case, checked. `where` starts the message of the error: `cases[3]`, `line 7`. */
export function parseCase(value: unknown, where: string): EvalCase {
  try {
    return caseOf(value);
  } catch (err) {
    if (err instanceof CaseProblem) throw new DatasetError(`${where}: ${err.message}`);
    throw err;
  }
}

function caseOf(value: unknown): EvalCase {
  if (!isRecord(value)) throw new CaseProblem('a case must be a JSON object like {"id": "q1", "input": "...", "target": "..."}');
  const unknown = Object.keys(value).find((k) => !CASE_KEYS.includes(k));
  if (unknown !== undefined) throw new CaseProblem(`unknown field '${clip(unknown)}' (a case has ${CASE_KEYS.join(', ')})`);

  const { id, input, target, metadata, files } = value;
  if (id === undefined) throw new CaseProblem("'id' is required");
  if (typeof id !== 'string' || !caseIdRe.test(id)) {
    throw new CaseProblem("'id' must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit");
  }
  const out: EvalCase = { id, input: inputOf(input), target: '' };
  const meta = metadata === undefined ? undefined : metadataOf(metadata);
  const workspaceFiles = files === undefined ? undefined : filesOf(files);
  out.target = targetOf(target, workspaceFiles !== undefined || meta?.checks !== undefined);
  if (meta !== undefined && Object.keys(meta).length > 0) out.metadata = meta;
  if (workspaceFiles !== undefined) out.files = workspaceFiles;
  return out;
}

function inputOf(input: unknown): string | ChatTurn[] {
  if (input === undefined) throw new CaseProblem("'input' is required");
  if (typeof input === 'string') {
    if (input.trim().length === 0) throw new CaseProblem("'input' is empty");
    storableText(input, "'input'", MAX_INPUT_BYTES);
    return input;
  }
  if (!Array.isArray(input)) throw new CaseProblem("'input' must be a string or a list of chat turns [{\"role\": \"user\", \"content\": \"...\"}]");
  if (input.length === 0 || input.length > MAX_TURNS) throw new CaseProblem(`'input' must have 1 to ${MAX_TURNS} chat turns`);
  const turns = input.map((turn, i) => turnOf(turn, `input[${i}]`));
  const bytes = turns.reduce((sum, t) => sum + Buffer.byteLength(t.content, 'utf8'), 0);
  if (bytes > MAX_INPUT_BYTES) throw new CaseProblem(`'input' has more than ${MAX_INPUT_BYTES} bytes of content`);
  if (turns[turns.length - 1].role !== 'user') throw new CaseProblem(`'input' must end with a user turn (the turn the model answers)`);
  return turns;
}

function turnOf(turn: unknown, field: string): ChatTurn {
  if (!isRecord(turn)) throw new CaseProblem(`'${field}' must be an object like {"role": "user", "content": "..."}`);
  const unknown = Object.keys(turn).find((k) => k !== 'role' && k !== 'content');
  if (unknown !== undefined) throw new CaseProblem(`'${field}' has an unknown field '${clip(unknown)}' (a turn has role, content)`);
  const { role, content } = turn;
  if (typeof role !== 'string' || !ROLES.includes(role)) throw new CaseProblem(`'${field}.role' must be one of ${ROLES.join(', ')}`);
  if (typeof content !== 'string' || content.trim().length === 0) throw new CaseProblem(`'${field}.content' must be a non-empty string`);
  storableText(content, `'${field}.content'`, MAX_INPUT_BYTES);
  return { role: role as ChatTurn['role'], content };
}

function targetOf(target: unknown, checkedByFiles: boolean): string | string[] {
  if (target === undefined) throw new CaseProblem("'target' is required");
  if (typeof target === 'string') {
    if (target.length === 0 && checkedByFiles) return target;
    if (target.trim().length === 0) {
      throw new CaseProblem("'target' is empty (an empty target is allowed only on a case checked by its files: one with 'files' or 'metadata.checks')");
    }
    storableText(target, "'target'", MAX_TARGET_BYTES);
    return target;
  }
  if (!Array.isArray(target)) throw new CaseProblem("'target' must be a string or a list of strings");
  if (target.length === 0 || target.length > MAX_TARGETS) throw new CaseProblem(`'target' must list 1 to ${MAX_TARGETS} acceptable answers`);
  target.forEach((t, i) => {
    if (typeof t !== 'string' || t.trim().length === 0) throw new CaseProblem(`'target[${i}]' must be a non-empty string`);
    storableText(t, `'target[${i}]'`, MAX_TARGET_BYTES);
  });
  return [...(target as string[])];
}

function metadataOf(metadata: unknown): Record<string, unknown> {
  if (!isRecord(metadata)) throw new CaseProblem("'metadata' must be a JSON object");
  const problem = jsonProblem(metadata);
  if (problem) throw new CaseProblem(`'metadata${problem.at}' ${problem.why}`);
  const json = JSON.stringify(metadata);
  if (Buffer.byteLength(json, 'utf8') > MAX_METADATA_BYTES) throw new CaseProblem(`'metadata' is more than ${MAX_METADATA_BYTES} bytes as JSON`);
  if (metadata.checks !== undefined) {
    try {
      parseFileChecks(metadata.checks, 'metadata.checks');
    } catch (err) {
      if (err instanceof EvalSpecError) throw new CaseProblem(err.message);
      throw err;
    }
  }
  // A copy: the case owns its metadata, and a value built in code keeps only what JSON keeps.
  return JSON.parse(json) as Record<string, unknown>;
}

function filesOf(files: unknown): Record<string, string> {
  if (!isRecord(files)) throw new CaseProblem("'files' must be an object of workspace path -> text");
  const paths = Object.keys(files);
  if (paths.length === 0 || paths.length > MAX_FILES) throw new CaseProblem(`'files' must hold 1 to ${MAX_FILES} files`);
  const out: Record<string, string> = {};
  for (const path of paths) {
    const problem = workspacePathProblem(path);
    if (problem) throw new CaseProblem(`'files' path '${clip(path)}' ${problem}`);
    const text = files[path];
    if (typeof text !== 'string') throw new CaseProblem(`'files' entry '${clip(path)}' must be text (a string)`);
    storableText(text, `'files' entry '${clip(path)}'`, MAX_FILE_BYTES);
    out[path] = text;
  }
  // `a` and `a/b` cannot both be written: `a` would have to be a file and a folder.
  const set = new Set(paths);
  for (const path of paths) {
    const segments = path.split('/');
    for (let n = 1; n < segments.length; n++) {
      const folder = segments.slice(0, n).join('/');
      if (set.has(folder)) throw new CaseProblem(`'files' has both '${clip(folder)}' and '${clip(path)}' inside it`);
    }
  }
  return out;
}

// eslint-disable-next-line no-control-regex -- NUL is exactly what is looked for
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_WHY = 'contains a NUL character or a lone UTF-16 surrogate, which cannot be stored';

function storableText(text: string, field: string, maxBytes: number): void {
  if (UNSTORABLE.test(text)) throw new CaseProblem(`${field} ${UNSTORABLE_WHY}`);
  if (Buffer.byteLength(text, 'utf8') > maxBytes) throw new CaseProblem(`${field} is more than ${maxBytes} bytes`);
}

/**
 * The first place inside `value` that is not storable JSON: a string or key Postgres cannot store, a
 * number JSON cannot spell, a value JSON has no form for, or nesting deeper than MAX_METADATA_DEPTH
 * (which also stops a cycle). An explicit stack rather than recursion, so no input overflows the call stack.
 */
function jsonProblem(value: unknown): { at: string; why: string } | undefined {
  const stack: { item: unknown; at: string; depth: number }[] = [{ item: value, at: '', depth: 0 }];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const { item, at, depth } = next;
    if (depth > MAX_METADATA_DEPTH) return { at, why: `is nested deeper than ${MAX_METADATA_DEPTH} levels` };
    if (item === null || typeof item === 'boolean') continue;
    if (typeof item === 'string') {
      if (UNSTORABLE.test(item)) return { at, why: UNSTORABLE_WHY };
    } else if (typeof item === 'number') {
      if (!Number.isFinite(item)) return { at, why: 'is not a finite number' };
    } else if (Array.isArray(item)) {
      item.forEach((v, i) => stack.push({ item: v, at: `${at}[${i}]`, depth: depth + 1 }));
    } else if (isRecord(item) && [Object.prototype, null].includes(Object.getPrototypeOf(item))) {
      for (const [key, v] of Object.entries(item)) {
        if (UNSTORABLE.test(key)) return { at, why: `has a key that ${UNSTORABLE_WHY}` };
        stack.push({ item: v, at: `${at}.${key}`, depth: depth + 1 });
      }
    } else {
      return { at, why: `is not JSON (${typeof item})` };
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// JSONL.
// ---------------------------------------------------------------------------------------------

export interface DatasetLimits {
  /** Default DEFAULT_MAX_CASES. */
  maxCases?: number;
}

/**
 * A JSONL dataset read line by line (e.g. from `readline` over an upload): one case per line, blank
 * lines skipped, line numbers 1-based. Counting the bytes read is the caller's business.
 */
export async function parseDatasetLines(lines: AsyncIterable<string>, limits: DatasetLimits = {}): Promise<EvalCase[]> {
  const reader = new DatasetReader(limits);
  for await (const chunk of lines) reader.addLines(chunk);
  return reader.finish();
}

/** The same as parseDatasetLines over text already in memory. */
export function parseDatasetText(text: string, limits: DatasetLimits = {}): EvalCase[] {
  const reader = new DatasetReader(limits);
  reader.addLines(text);
  return reader.finish();
}

class DatasetReader {
  private readonly cases: EvalCase[] = [];
  private readonly lineOfId = new Map<string, number>();
  private readonly maxCases: number;
  private line = 0;

  constructor(limits: DatasetLimits) {
    const max = limits.maxCases ?? DEFAULT_MAX_CASES;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxCases must be a positive integer, got ${max}`);
    this.maxCases = max;
  }

  /** One line, or several joined by `\n` (a source that yields text rather than lines). */
  addLines(text: string): void {
    for (const line of text.split('\n')) this.add(line);
  }

  private add(raw: string): void {
    this.line += 1;
    const at = this.line;
    let text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (at === 1 && text.startsWith('\ufeff')) text = text.slice(1);
    if (text.trim().length === 0) return;
    if (this.cases.length >= this.maxCases) throw new DatasetError(`line ${at}: the dataset has more than ${this.maxCases} cases`, at);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new DatasetError(`line ${at}: not valid JSON (${(err as Error).message})`, at);
    }
    let evalCase: EvalCase;
    try {
      evalCase = caseOf(value);
    } catch (err) {
      if (err instanceof CaseProblem) throw new DatasetError(`line ${at}: ${err.message}`, at);
      throw err;
    }
    const first = this.lineOfId.get(evalCase.id);
    if (first !== undefined) throw new DatasetError(`line ${at}: duplicate id '${evalCase.id}' (first on line ${first})`, at);
    this.lineOfId.set(evalCase.id, at);
    this.cases.push(evalCase);
  }

  finish(): EvalCase[] {
    if (this.cases.length === 0) throw new DatasetError('the dataset has no cases (every line is blank)');
    return this.cases;
  }
}

// ---------------------------------------------------------------------------------------------
// Identity and display.
// ---------------------------------------------------------------------------------------------

/** The cases as JSONL, in their order, each with its keys sorted at every depth, `\n` after each. */
export function canonicalJsonl(cases: EvalCase[]): string {
  return cases.map((c) => `${canonicalJson(c)}\n`).join('');
}

/** Where a stored dataset's cases live in the object store: the catalogue writes there, the eval workers read there. */
export const datasetObjectKey = (org: string, id: string): string => `datasets/${org}/${id}.jsonl`;

/**
 * Lowercase hex sha256 of canonicalJsonl: the same cases in the same order get the same id whether
 * they came inline, uploaded or shipped, however their keys were ordered or their JSON spaced.
 */
export function datasetId(cases: EvalCase[]): string {
  return createHash('sha256').update(canonicalJsonl(cases), 'utf8').digest('hex');
}

/** The input as one text, for display and for the judge: chat turns become `role: content` lines. */
export function caseText(input: EvalCase['input']): string {
  return typeof input === 'string' ? input : input.map((t) => `${t.role}: ${t.content}`).join('\n');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function clip(text: string, max = 60): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
