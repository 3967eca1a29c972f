/**
 * The eval suites AgentRun ships: `libs/evals/suites/index.json` (the manifest) and one JSONL dataset per
 * suite beside it. They are read from disk relative to this file's directory, which is `libs/evals/src`
 * under jest and `libs/evals/dist` once compiled; in both, and in the image (which copies
 * `libs/evals/suites` next to `libs/evals/dist`), the suites are `../suites`.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DatasetError, parseDatasetText, type EvalCase } from './dataset';

export const SUITE_NAMES = ['qa', 'mcq', 'agent'] as const;
export type SuiteName = (typeof SUITE_NAMES)[number];

export const SUITE_SOLVERS = ['generate', 'agent'] as const;
export type SuiteSolver = (typeof SUITE_SOLVERS)[number];

/** A default scorer: a name, or a name with its options (the form the scorer registry accepts). */
export type SuiteScorer = string | ({ name: string } & Record<string, unknown>);

export interface SuiteManifestEntry {
  name: SuiteName;
  /** The JSONL file, in the suites directory. */
  file: string;
  description: string;
  solver: SuiteSolver;
  /** The scorers an eval of this suite uses unless it names its own. */
  scorers: SuiteScorer[];
}

export interface SuiteListing extends SuiteManifestEntry {
  /** How many cases the suite has. */
  cases: number;
}

/** One case of a shipped suite: a dataset case. */
export type SuiteCase = EvalCase;

export interface ShippedSuite {
  manifest: SuiteManifestEntry;
  cases: SuiteCase[];
}

/** Where the shipped suites are: `libs/evals/suites`, from the sources and from the compiled lib alike. */
export const SUITES_DIR = resolve(__dirname, '..', 'suites');
export const SUITES_MANIFEST = 'index.json';

/** A shipped suite that cannot be found or read: a packaging fault, not a user's mistake. */
export class SuiteError extends Error {
  override readonly name = 'SuiteError';
}

export function isSuiteName(name: string): name is SuiteName {
  return (SUITE_NAMES as readonly string[]).includes(name);
}

/** The manifest's entries, in manifest order, each with its case count. */
export function listSuites(dir: string = SUITES_DIR): SuiteListing[] {
  return readManifest(dir).map((entry) => ({ ...entry, cases: readCases(dir, entry).length }));
}

/** One shipped suite: its manifest entry and its cases, in file order. */
export function loadSuite(name: string, dir: string = SUITES_DIR): ShippedSuite {
  if (!isSuiteName(name)) throw new SuiteError(`unknown suite '${name}': the shipped suites are ${SUITE_NAMES.join(', ')}`);
  const manifest = readManifest(dir).find((entry) => entry.name === name);
  if (!manifest) throw new SuiteError(`${join(dir, SUITES_MANIFEST)} has no entry for the suite '${name}'`);
  return { manifest, cases: readCases(dir, manifest) };
}

// ---------------------------------------------------------------------------------------------

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new SuiteError(`the shipped suites are incomplete: ${path} is missing (the build must copy libs/evals/suites)`);
    throw err;
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function readManifest(dir: string): SuiteManifestEntry[] {
  const path = join(dir, SUITES_MANIFEST);
  let raw: unknown;
  try {
    raw = JSON.parse(readText(path));
  } catch (err) {
    if (err instanceof SuiteError) throw err;
    throw new SuiteError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
  if (!isObject(raw) || !Array.isArray(raw.suites)) throw new SuiteError(`${path} must be an object with a 'suites' array`);
  const entries = (raw.suites as unknown[]).map((entry, i) => manifestEntry(entry, `${path} suites[${i}]`));
  const named = entries.map((e) => e.name);
  const missing = SUITE_NAMES.filter((name) => !named.includes(name));
  const twice = named.filter((name, i) => named.indexOf(name) !== i);
  const problems = [...(missing.length ? [`missing: ${missing.join(', ')}`] : []), ...(twice.length ? [`twice: ${twice.join(', ')}`] : [])];
  if (problems.length) throw new SuiteError(`${path} must list each of ${SUITE_NAMES.join(', ')} once (${problems.join('; ')})`);
  return entries;
}

function manifestEntry(value: unknown, where: string): SuiteManifestEntry {
  if (!isObject(value)) throw new SuiteError(`${where} must be an object`);
  const { name, file, description, solver, scorers } = value;
  if (typeof name !== 'string' || !isSuiteName(name)) throw new SuiteError(`${where}.name must be one of ${SUITE_NAMES.join(', ')}`);
  if (typeof file !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*\.jsonl$/.test(file)) throw new SuiteError(`${where}.file must be a .jsonl file name in the suites directory`);
  if (typeof description !== 'string' || description.trim() === '') throw new SuiteError(`${where}.description must be a non-empty string`);
  if (typeof solver !== 'string' || !(SUITE_SOLVERS as readonly string[]).includes(solver)) throw new SuiteError(`${where}.solver must be one of ${SUITE_SOLVERS.join(', ')}`);
  const scorerOk = (s: unknown) => (typeof s === 'string' && s !== '') || (isObject(s) && typeof s.name === 'string' && s.name !== '');
  if (!Array.isArray(scorers) || scorers.length === 0 || !scorers.every(scorerOk)) {
    throw new SuiteError(`${where}.scorers must be a non-empty list of scorer names or { name, ...options }`);
  }
  return { name, file, description, solver: solver as SuiteSolver, scorers: scorers as SuiteScorer[] };
}

function readCases(dir: string, entry: SuiteManifestEntry): SuiteCase[] {
  const path = join(dir, entry.file);
  // The same rules as a user's dataset: a suite is a dataset that ships with the platform.
  try {
    return parseDatasetText(readText(path));
  } catch (err) {
    if (err instanceof DatasetError) throw new SuiteError(`${entry.file} ${err.message}`);
    throw err;
  }
}
