/**
 * The scorers and solvers an eval may name, and their options. `normaliseScorers` and `normaliseSolver`
 * are the one check at every boundary (HTTP, SDK, shipped suites): what they return is complete and
 * valid, so nothing downstream re-checks an option, and what they refuse is refused with a sentence
 * that says which name or option is wrong.
 */
import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { boundedExec } from './bounded-regex';
import { canonicalJson } from './canonical';
import { workspacePathProblem } from './paths';

export const SCORER_NAMES = ['exact', 'includes', 'regex', 'numeric', 'choice', 'json', 'files', 'model_graded'] as const;
export type ScorerName = (typeof SCORER_NAMES)[number];

export const SOLVER_NAMES = ['generate', 'agent', 'synthetic'] as const;
export type SolverName = (typeof SOLVER_NAMES)[number];

/** A file an agent case must leave (or must not leave) in its workspace. */
export interface FileCheck {
  path: string;
  /** Default true. `false`: the file must not exist (and then nothing else may be asked of it). */
  exists?: boolean;
  /** The file's text contains this, case-sensitively. */
  contains?: string;
  /** The file's text matches this regular expression (no flags). */
  matches?: string;
}

export type ScorerSpec =
  | { name: 'exact' }
  | { name: 'includes' }
  /** `flags` default `i`; `""` for a case-sensitive match. */
  | { name: 'regex'; pattern: string; flags?: string }
  | { name: 'numeric'; tolerance?: number }
  | { name: 'choice' }
  | { name: 'json'; schema?: Record<string, unknown> }
  | { name: 'files'; checks?: FileCheck[] }
  | { name: 'model_graded'; rubric?: string; model?: string; endpoint?: string };

export type SolverSpec =
  | { name: 'generate'; system_prompt?: string; temperature?: number; max_tokens?: number }
  | { name: 'agent'; max_steps?: number; policy?: 'llm' | 'scripted' }
  | { name: 'synthetic'; fail_fraction?: number };

/** An eval's scorers or solver are not ones it may name, or carry an option that is wrong. */
export class EvalSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EvalSpecError';
  }
}

export const MAX_CHECKS = 200;
const MAX_PATTERN_CHARS = 4096;
const MAX_TEXT_OPTION_CHARS = 64 * 1024;
const MAX_NAME_CHARS = 200;

/** A problem with one option, before it is known whose option it is. */
class OptionProblem extends Error {}

/** `read()`, with an OptionProblem it throws made an EvalSpecError that says whose option it was (when `whose` is given). */
function optionsOf<T>(whose: string | undefined, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof OptionProblem) throw new EvalSpecError(whose === undefined ? err.message : `${whose}: ${err.message}`);
    throw err;
  }
}

type Options = Record<string, unknown>;

/** The scorers an eval names: each a name (`"exact"`) or an object (`{"name": "regex", "pattern": "..."}`). */
export function normaliseScorers(input: unknown): ScorerSpec[] {
  if (!Array.isArray(input)) throw new EvalSpecError(`scorers must be a list of scorer names or objects: valid scorers are ${SCORER_NAMES.join(', ')}`);
  if (input.length === 0) throw new EvalSpecError(`scorers must name at least one scorer: valid scorers are ${SCORER_NAMES.join(', ')}`);
  const specs = input.map((item, i) => normaliseScorer(item, `scorers[${i}]`));
  // Scores are reported per scorer name, so one name twice would make two scores indistinguishable.
  const seen = new Set<string>();
  for (const spec of specs) {
    if (seen.has(spec.name)) throw new EvalSpecError(`scorer '${spec.name}' is listed twice`);
    seen.add(spec.name);
  }
  return specs;
}

function normaliseScorer(item: unknown, where: string): ScorerSpec {
  const { name, options } = nameAndOptions(item, where, 'scorer', SCORER_NAMES);
  return optionsOf(`scorer '${name}'`, () => scorerSpec(name, options));
}

function scorerSpec(name: ScorerName, options: Options): ScorerSpec {
  switch (name) {
    case 'exact':
    case 'includes':
    case 'choice':
      onlyOptions(options, []);
      return { name };
    case 'regex': {
      onlyOptions(options, ['pattern', 'flags']);
      const pattern = requiredText(options, 'pattern', MAX_PATTERN_CHARS);
      const flags = optionalFlags(options);
      compileRegex(pattern, flags);
      return flags === undefined ? { name, pattern } : { name, pattern, flags };
    }
    case 'numeric': {
      onlyOptions(options, ['tolerance']);
      const tolerance = optionalNumber(options, 'tolerance', 0, Number.MAX_VALUE, 'a number >= 0');
      return tolerance === undefined ? { name } : { name, tolerance };
    }
    case 'json': {
      onlyOptions(options, ['schema']);
      if (options.schema === undefined) return { name };
      const schema = options.schema;
      if (!isRecord(schema)) throw new OptionProblem("'schema' must be a JSON Schema object");
      schemaCheckOf(schema);
      return { name, schema };
    }
    case 'files': {
      onlyOptions(options, ['checks']);
      return options.checks === undefined ? { name } : { name, checks: fileChecksOf(options.checks, 'checks') };
    }
    case 'model_graded': {
      onlyOptions(options, ['rubric', 'model', 'endpoint']);
      const rubric = optionalText(options, 'rubric', MAX_TEXT_OPTION_CHARS);
      const model = optionalText(options, 'model', MAX_NAME_CHARS);
      const endpoint = optionalText(options, 'endpoint', 63);
      // A configured endpoint's name, never a URL: the workers hold the addresses and keys.
      if (endpoint !== undefined && !/^[a-z0-9][a-z0-9_-]{0,62}$/.test(endpoint)) throw new OptionProblem("'endpoint' must name a configured model endpoint (like 'default')");
      return withDefined({ name, rubric, model, endpoint });
    }
    default: {
      const unreachable: never = name;
      throw new Error(`no options for scorer ${String(unreachable)}`);
    }
  }
}

/**
 * The solver an eval names: `"generate"`, `"agent"`, `"synthetic"`, or an object with its options
 * (`{"name": "generate", "temperature": 0}`).
 */
export function normaliseSolver(input: unknown): SolverSpec {
  const { name, options } = nameAndOptions(input, 'solver', 'solver', SOLVER_NAMES);
  return optionsOf(`solver '${name}'`, () => solverSpec(name, options));
}

function solverSpec(name: SolverName, options: Options): SolverSpec {
  switch (name) {
    case 'generate': {
      onlyOptions(options, ['system_prompt', 'temperature', 'max_tokens']);
      const system_prompt = optionalText(options, 'system_prompt', MAX_TEXT_OPTION_CHARS);
      const temperature = optionalNumber(options, 'temperature', 0, 2, 'a number from 0 to 2');
      const max_tokens = optionalInteger(options, 'max_tokens', 1, 32768);
      return withDefined({ name, system_prompt, temperature, max_tokens });
    }
    case 'agent': {
      onlyOptions(options, ['max_steps', 'policy']);
      const max_steps = optionalInteger(options, 'max_steps', 1, 200);
      const policy = options.policy;
      if (policy !== undefined && policy !== 'llm' && policy !== 'scripted') throw new OptionProblem("'policy' must be 'llm' or 'scripted'");
      return withDefined({ name, max_steps, policy });
    }
    case 'synthetic': {
      onlyOptions(options, ['fail_fraction']);
      const fail_fraction = optionalNumber(options, 'fail_fraction', 0, 1, 'a number from 0 to 1');
      return withDefined({ name, fail_fraction });
    }
    default: {
      const unreachable: never = name;
      throw new Error(`no options for solver ${String(unreachable)}`);
    }
  }
}

/**
 * Why these scorers cannot score what this solver produces, or undefined. Only `files` needs
 * something a solver may not give: a workspace, which `generate` (one chat completion) never has.
 */
export function pairingProblem(solver: SolverSpec, scorers: ScorerSpec[]): string | undefined {
  if (solver.name === 'generate' && scorers.some((s) => s.name === 'files')) {
    return "scorer 'files' checks an agent's workspace, and solver 'generate' has none: use solver 'agent'";
  }
  return undefined;
}

/**
 * File checks, from a scorer's options or a case's `metadata.checks`. Throws EvalSpecError naming the
 * field (`'checks[2].path' contains '..'`); the caller says whose field it is.
 */
export function parseFileChecks(value: unknown, field = 'checks'): FileCheck[] {
  return optionsOf(undefined, () => fileChecksOf(value, field));
}

function fileChecksOf(value: unknown, field: string): FileCheck[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_CHECKS) {
    throw new OptionProblem(`'${field}' must be a list of 1 to ${MAX_CHECKS} file checks`);
  }
  return value.map((item, i) => fileCheckOf(item, `${field}[${i}]`));
}

function fileCheckOf(item: unknown, field: string): FileCheck {
  if (!isRecord(item)) throw new OptionProblem(`'${field}' must be an object like {"path": "out.md", "contains": "..."}`);
  const unknown = Object.keys(item).find((k) => !['path', 'exists', 'contains', 'matches'].includes(k));
  if (unknown !== undefined) throw new OptionProblem(`'${field}' has an unknown field '${unknown}' (a check has path, exists, contains, matches)`);
  const { path, exists, contains, matches } = item;
  if (typeof path !== 'string') throw new OptionProblem(`'${field}.path' must be a string`);
  const pathProblem = workspacePathProblem(path);
  if (pathProblem) throw new OptionProblem(`'${field}.path' ${pathProblem}`);
  if (exists !== undefined && typeof exists !== 'boolean') throw new OptionProblem(`'${field}.exists' must be true or false`);
  if (contains !== undefined && (typeof contains !== 'string' || contains.length === 0 || contains.length > MAX_TEXT_OPTION_CHARS)) {
    throw new OptionProblem(`'${field}.contains' must be a non-empty string of at most ${MAX_TEXT_OPTION_CHARS} characters`);
  }
  if (matches !== undefined) {
    if (typeof matches !== 'string' || matches.length === 0 || matches.length > MAX_PATTERN_CHARS) {
      throw new OptionProblem(`'${field}.matches' must be a non-empty regular expression of at most ${MAX_PATTERN_CHARS} characters`);
    }
    compileRegex(matches, '', `'${field}.matches'`);
  }
  if (exists === false && (contains !== undefined || matches !== undefined)) {
    throw new OptionProblem(`'${field}' says the file must not exist, so it cannot also ask what it contains`);
  }
  return withDefined({ path, exists, contains, matches });
}

// ---------------------------------------------------------------------------------------------
// JSON Schema for the `json` scorer: compiled once per distinct schema.
// ---------------------------------------------------------------------------------------------

/** Why a value fails the schema (Ajv's errors as one sentence), or undefined when it passes. */
export type JsonSchemaCheck = (value: unknown) => string | undefined;

const MAX_SCHEMA_CHARS = 64 * 1024;
const MAX_COMPILED_SCHEMAS = 256;
const compiledSchemas = new Map<string, JsonSchemaCheck>();

/**
 * The check for `schema`, compiled on first use and kept by the schema's canonical text: specs cross
 * process and activity boundaries as plain JSON, so the object itself is no stable key. Throws
 * EvalSpecError (through normaliseScorers: an option error) when the schema is not a valid schema.
 */
export function compileJsonSchema(schema: Record<string, unknown>): JsonSchemaCheck {
  return optionsOf("scorer 'json'", () => schemaCheckOf(schema));
}

/** Ajv's regular-expression engine, matching through `boundedExec`. */
function boundedRegExp(pattern: string, flags: string): { test: (text: string) => boolean } {
  const re = new RegExp(pattern, flags);
  return { test: (text) => boundedExec(re, text) !== null };
}
boundedRegExp.code = 'boundedRegExp';

function schemaCheckOf(schema: Record<string, unknown>): JsonSchemaCheck {
  const key = canonicalJson(schema);
  const known = compiledSchemas.get(key);
  if (known) return known;
  if (key.length > MAX_SCHEMA_CHARS) throw new OptionProblem(`'schema' is longer than ${MAX_SCHEMA_CHARS} characters as JSON`);
  // One Ajv per schema: two unrelated schemas with the same `$id` must not collide in a shared instance.
  // No `loadSchema`, so a remote `$ref` is an error at compile time, never a fetch.
  // A schema's `pattern`s are a user's regular expressions too: each match runs with the time limit.
  const ajv = new Ajv({ allErrors: true, strict: false, code: { regExp: boundedRegExp } });
  addFormats(ajv);
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(schema);
  } catch (err) {
    throw new OptionProblem(`'schema' is not a valid JSON Schema (${(err as Error).message})`);
  }
  const check: JsonSchemaCheck = (value) => (validate(value) ? undefined : describeSchemaErrors(validate.errors));
  if (compiledSchemas.size >= MAX_COMPILED_SCHEMAS) compiledSchemas.delete(compiledSchemas.keys().next().value as string);
  compiledSchemas.set(key, check);
  return check;
}

function describeSchemaErrors(errors: ErrorObject[] | null | undefined): string {
  if (!errors?.length) return 'does not match the schema';
  const sentences = errors.slice(0, 5).map((e) => {
    const at = e.instancePath ? e.instancePath.replace(/^\//, '').replace(/\//g, '.') : 'the value';
    if (e.keyword === 'additionalProperties') return `${at}: unknown property '${(e.params as { additionalProperty: string }).additionalProperty}'`;
    return `${at} ${e.message ?? 'is invalid'}`;
  });
  return sentences.join('; ') + (errors.length > 5 ? `; and ${errors.length - 5} more` : '');
}

// ---------------------------------------------------------------------------------------------
// Reading names and options.
// ---------------------------------------------------------------------------------------------

function nameAndOptions<N extends string>(item: unknown, where: string, kind: string, names: readonly N[]): { name: N; options: Options } {
  const valid = `valid ${kind}s are ${names.join(', ')}`;
  let name: unknown;
  let options: Options = {};
  if (typeof item === 'string') name = item;
  else if (isRecord(item)) ({ name, ...options } = item);
  else throw new EvalSpecError(`${where} must be a ${kind} name or an object with a 'name': ${valid}`);
  if (typeof name !== 'string') throw new EvalSpecError(`${where} has no 'name': ${valid}`);
  if (!(names as readonly string[]).includes(name)) throw new EvalSpecError(`unknown ${kind} '${clip(name)}': ${valid}`);
  return { name: name as N, options };
}

function onlyOptions(options: Options, allowed: string[]): void {
  const unknown = Object.keys(options).find((k) => !allowed.includes(k));
  if (unknown === undefined) return;
  if (allowed.length === 0) throw new OptionProblem(`unknown option '${clip(unknown)}' (it takes no options)`);
  throw new OptionProblem(`unknown option '${clip(unknown)}' (its options are ${allowed.join(', ')})`);
}

function requiredText(options: Options, key: string, max: number): string {
  if (options[key] === undefined) throw new OptionProblem(`'${key}' is required`);
  return optionalText(options, key, max) as string;
}

function optionalText(options: Options, key: string, max: number): string | undefined {
  const value = options[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > max) {
    throw new OptionProblem(`'${key}' must be a non-empty string of at most ${max} characters`);
  }
  return value;
}

function optionalNumber(options: Options, key: string, min: number, max: number, what: string): number | undefined {
  const value = options[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) throw new OptionProblem(`'${key}' must be ${what}`);
  return value;
}

function optionalInteger(options: Options, key: string, min: number, max: number): number | undefined {
  const value = options[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new OptionProblem(`'${key}' must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** Flags that change what matches; `g` and `y` only change where a repeated search starts, so they are refused. */
function optionalFlags(options: Options): string | undefined {
  const flags = options.flags;
  if (flags === undefined) return undefined;
  if (typeof flags !== 'string' || !/^[imsuv]*$/.test(flags) || new Set(flags).size !== flags.length) {
    throw new OptionProblem("'flags' must be a string of distinct flags from i, m, s, u, v");
  }
  return flags;
}

function compileRegex(pattern: string, flags: string | undefined, field = "'pattern'"): RegExp {
  try {
    return new RegExp(pattern, flags);
  } catch (err) {
    throw new OptionProblem(`${field} is not a regular expression (${(err as Error).message})`);
  }
}


function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The object without its undefined fields, so a normalised spec says only what was given. */
function withDefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function clip(text: string, max = 60): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
