/**
 * Comparing an eval run (`current`) with an earlier one (`baseline`) case by case, with a paired
 * bootstrap interval for the mean difference. Pairing by case id removes the spread between cases
 * (some are simply harder) from the interval, which is what makes a small difference detectable.
 * The bootstrap draws from a seeded generator, so the same runs always give the same interval.
 */

export interface CaseResult {
  case_id: string;
  /** 0..1; null when the case was not graded (it failed before it could be scored). */
  score: number | null;
}

export type CaseChange = 'improved' | 'regressed' | 'unchanged' | 'added' | 'removed';
export const CASE_CHANGES: readonly CaseChange[] = ['improved', 'regressed', 'unchanged', 'added', 'removed'];

export interface CaseComparison {
  case_id: string;
  change: CaseChange;
  current: number | null;
  baseline: number | null;
  /** `ungraded`: in both runs, but one of them has no score for it, so it cannot have changed. */
  note?: 'ungraded';
}

export interface Comparison {
  /** Sorted by case id. */
  cases: CaseComparison[];
  counts: Record<CaseChange, number>;
  /** How many cases have a score in both runs; the means and the interval are over these. */
  paired: number;
  mean_current: number | null;
  mean_baseline: number | null;
  /** mean(current - baseline) over the paired cases. */
  mean_difference: number | null;
  /** 95% percentile interval of mean_difference by paired bootstrap; null with fewer than 2 paired cases. */
  ci95: [number, number] | null;
}

export interface CompareOptions {
  /** Default 2000. */
  resamples?: number;
  /** Default DEFAULT_SEED: a fixed seed, so that a comparison is reproducible without choosing one. */
  seed?: number;
}

export const DEFAULT_RESAMPLES = 2000;
export const MAX_RESAMPLES = 100_000;
export const DEFAULT_SEED = 20240515;

export function compareCases(current: CaseResult[], baseline: CaseResult[], opts: CompareOptions = {}): Comparison {
  const resamples = opts.resamples ?? DEFAULT_RESAMPLES;
  if (!Number.isInteger(resamples) || resamples < 1 || resamples > MAX_RESAMPLES) {
    throw new RangeError(`resamples must be an integer from 1 to ${MAX_RESAMPLES}, got ${resamples}`);
  }
  const seed = opts.seed ?? DEFAULT_SEED;
  if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);

  const now = byCaseId(current, 'current');
  const before = byCaseId(baseline, 'baseline');
  const ids = [...new Set([...now.keys(), ...before.keys()])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const cases = ids.map((id) => compareOne(id, now.get(id), before.get(id)));

  const counts = Object.fromEntries(CASE_CHANGES.map((c) => [c, 0])) as Record<CaseChange, number>;
  for (const c of cases) counts[c.change] += 1;

  // Unrounded scores: the case list shows them to 4 decimals, but the means are of what was measured.
  const pairedScores = ids.filter((id) => now.get(id) != null && before.get(id) != null).map((id) => [now.get(id) as number, before.get(id) as number]);
  const differences = pairedScores.map(([c, b]) => c - b);
  return {
    cases,
    counts,
    paired: pairedScores.length,
    mean_current: pairedScores.length ? round4(mean(pairedScores.map(([c]) => c))) : null,
    mean_baseline: pairedScores.length ? round4(mean(pairedScores.map(([, b]) => b))) : null,
    mean_difference: differences.length ? round4(mean(differences)) : null,
    ci95: differences.length >= 2 ? bootstrapInterval(differences, resamples, seed) : null,
  };
}

function byCaseId(results: CaseResult[], side: string): Map<string, number | null> {
  const map = new Map<string, number | null>();
  for (const r of results) {
    if (map.has(r.case_id)) throw new RangeError(`${side} has case '${r.case_id}' twice`);
    if (r.score !== null && !(Number.isFinite(r.score) && r.score >= 0 && r.score <= 1)) {
      throw new RangeError(`${side} case '${r.case_id}' has score ${r.score}, not a number from 0 to 1 or null`);
    }
    map.set(r.case_id, r.score);
  }
  return map;
}

function compareOne(case_id: string, current: number | null | undefined, baseline: number | null | undefined): CaseComparison {
  const shown = (score: number | null | undefined): number | null => (score == null ? null : round4(score));
  if (baseline === undefined) return { case_id, change: 'added', current: shown(current), baseline: null };
  if (current === undefined) return { case_id, change: 'removed', current: null, baseline: shown(baseline) };
  if (current === null || baseline === null) return { case_id, change: 'unchanged', current: shown(current), baseline: shown(baseline), note: 'ungraded' };
  // Compared at the precision shown, so float noise (0.1 + 0.2) is no change.
  const difference = round4(current - baseline);
  const change: CaseChange = difference > 0 ? 'improved' : difference < 0 ? 'regressed' : 'unchanged';
  return { case_id, change, current: shown(current), baseline: shown(baseline) };
}

/**
 * The 2.5th and 97.5th percentiles (linear interpolation between order statistics) of the means of
 * `resamples` resamples, each `differences.length` draws with replacement.
 */
export function bootstrapInterval(differences: number[], resamples: number, seed: number): [number, number] {
  const random = mulberry32(seed);
  const n = differences.length;
  const means = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += differences[Math.floor(random() * n)];
    means[r] = sum / n;
  }
  means.sort();
  return [round4(quantile(means, 0.025)), round4(quantile(means, 0.975))];
}

/** `sorted` at fraction `q`, interpolating between its neighbours. */
function quantile(sorted: Float64Array, q: number): number {
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.min(below + 1, sorted.length - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - below);
}

/** A small seeded generator of uniform numbers in [0, 1): reproducible, fast, good enough for resampling. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function mean(values: number[]): number {
  return values.reduce((sum, v) => sum + v, 0) / values.length;
}

function round4(value: number): number {
  // `+ 0` turns -0 into 0: a difference of nothing is printed as 0, not -0.
  return Math.round(value * 10_000) / 10_000 + 0;
}
