import type { CaseResultRow, DatasetList, EvalComparison, RunSummary } from '@agentrun/contracts';

/** Pure logic of the eval page's case table, case drawer and comparison, and of the eval start form. */

export type { CaseResultRow, EvalComparison };

/** The outcomes a finished case can have: what the case table filters on (`status=`). */
export const CASE_OUTCOMES = ['ok', 'failed', 'ungraded'] as const;

export interface CaseFilters {
  /** One of CASE_OUTCOMES, or '' for any. */
  status: string;
  /** Cases this scorer gave less than 1, or '' for any. */
  scorer: string;
  /** One of the contracts' CASE_ERROR_TYPES, or '' for any. */
  error_type: string;
}

export const NO_FILTERS: CaseFilters = { status: '', scorer: '', error_type: '' };

export function isFiltered(filters: CaseFilters): boolean {
  return Boolean(filters.status || filters.scorer || filters.error_type);
}

/** GET /runs/{id}/results with the filters set, as a page (after, limit) or as the JSONL export. */
export function resultsPath(runId: string, filters: CaseFilters, page: { after?: string | null; limit?: number; format?: 'jsonl' } = {}): string {
  const params = new URLSearchParams();
  if (filters.status) params.set('status', filters.status);
  if (filters.scorer) params.set('scorer', filters.scorer);
  if (filters.error_type) params.set('error_type', filters.error_type);
  if (page.format) params.set('format', page.format);
  if (page.after) params.set('after', page.after);
  if (page.limit !== undefined) params.set('limit', String(page.limit));
  const query = params.toString();
  return `/runs/${encodeURIComponent(runId)}/results${query ? `?${query}` : ''}`;
}

/**
 * The scorers seen so far, sorted: those already known plus those in `rows`. Kept as a union so that
 * filtering by a scorer (which hides rows) never takes a choice away from the filter itself.
 */
export function scorersSeen(known: readonly string[], rows: readonly CaseResultRow[]): string[] {
  const names = new Set(known);
  for (const row of rows) for (const s of row.result?.scores ?? []) names.add(s.scorer);
  return [...names].sort();
}

/** A score as the tables show it: four decimals, the precision comparisons are made at. */
export function scoreText(value: number | null | undefined): string {
  return typeof value === 'number' ? value.toFixed(4) : '—';
}

/** A signed difference: `+0.5000`, `−0.2500` (a minus sign, not a hyphen), `0.0000`. */
export function signedText(value: number): string {
  const text = Math.abs(value).toFixed(4);
  if (Number(text) === 0) return '0.0000';
  return value > 0 ? `+${text}` : `\u2212${text}`;
}

export function tokensText(usage: CaseResultRow['usage']): string {
  return usage ? `${usage.prompt_tokens} in · ${usage.completion_tokens} out` : '—';
}

export function durationText(ms: number | null | undefined): string {
  if (typeof ms !== 'number') return '—';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** How many rows a refresh asks for: the rows shown, so a refresh never shortens the table (the route caps a page at 500). */
export function refreshLimit(shown: number, pageSize: number): number {
  return Math.min(500, Math.max(pageSize, shown));
}

/**
 * The other evals a run can be compared with: eval runs over the same dataset (by content hash), the
 * run itself left out, newest first as listed.
 */
export function comparableEvals(runs: readonly RunSummary[], runId: string, datasetId: string | undefined): RunSummary[] {
  if (!datasetId) return [];
  return runs.filter((r) => r.kind === 'eval' && r.run_id !== runId && r.state?.dataset_id === datasetId);
}

export type CaseChange = EvalComparison['cases'][number]['change'];

/** In the order a reader wants them: what moved first, then what stayed, then what only one side has. */
export const CASE_CHANGES: readonly CaseChange[] = ['improved', 'regressed', 'unchanged', 'added', 'removed'];

/** Each kind of change with its count, every kind listed (0 when absent), in CASE_CHANGES order. */
export function changeCounts(comparison: Pick<EvalComparison, 'counts'>): { change: CaseChange; count: number }[] {
  return CASE_CHANGES.map((change) => ({ change, count: comparison.counts[change] ?? 0 }));
}

/** The mean difference in words, with its 95% interval and how many cases it is over. */
export function differenceText(comparison: Pick<EvalComparison, 'mean_difference' | 'ci95' | 'paired'>): string {
  const { mean_difference: difference, ci95, paired } = comparison;
  if (difference === null) return 'no case was graded in both runs, so there is no difference to show';
  const over = `over ${paired} case${paired === 1 ? '' : 's'} graded in both`;
  const interval = ci95 ? `95% interval ${signedText(ci95[0])} to ${signedText(ci95[1])}` : 'too few cases for an interval';
  return `${signedText(difference)} (${interval}), ${over}`;
}

/** A dataset the start form can name: a suite shipped with the platform, or one the org uploaded. */
export interface DatasetChoice {
  /** The `<option>` value: unique across both kinds. */
  value: string;
  label: string;
  /** What POST /evals takes as `dataset`. */
  dataset: { name: string } | { id: string };
  /** What the eval uses when the form leaves solver or scorers empty. */
  solver: string;
  scorers: string[];
}

/** A suite's scorers name themselves either as a string or as `{name, ...options}`. */
export function scorerName(spec: unknown): string {
  if (typeof spec === 'string') return spec;
  if (spec && typeof spec === 'object' && typeof (spec as { name?: unknown }).name === 'string') return (spec as { name: string }).name;
  return '?';
}

const shortId = (id: string): string => id.slice(0, 12);

/**
 * Suites first, then uploads newest first. An upload is named by its content hash, so the eval runs the
 * exact version listed even if the name is uploaded again; the gateway's defaults for an upload are the
 * `generate` solver and the `exact` scorer.
 */
export function datasetChoices(list: DatasetList): DatasetChoice[] {
  const suites = list.suites.map(
    (s): DatasetChoice => ({
      value: `suite:${s.name}`,
      label: `${s.name} (suite, ${s.cases} cases)`,
      dataset: { name: s.name },
      solver: s.solver,
      scorers: s.scorers.map(scorerName),
    }),
  );
  const uploads = list.datasets.map(
    (d): DatasetChoice => ({
      value: `id:${d.id}`,
      label: `${d.name} (uploaded, ${d.case_count} case${d.case_count === 1 ? '' : 's'}, ${shortId(d.id)})`,
      dataset: { id: d.id },
      solver: 'generate',
      scorers: ['exact'],
    }),
  );
  return [...suites, ...uploads];
}

/** The solvers the form offers: `generate` and every solver a shipped suite uses. */
export function solverChoices(list: DatasetList | undefined): string[] {
  return [...new Set(['generate', ...(list?.suites ?? []).map((s) => s.solver)])];
}

/** A comma-separated list as typed: trimmed, empties dropped. */
export function splitList(text: string): string[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
}

export interface EvalForm {
  runId: string;
  model: string;
  reviewers: string;
  source: 'synthetic' | 'dataset';
  /** Synthetic: a label, a number of made-up cases and the chance each fails. */
  suite: string;
  cases: string;
  failFraction: string;
  /** Dataset: a DatasetChoice, the solver and scorers ('' and empty: the dataset's own), an optional case limit and endpoint. */
  dataset: DatasetChoice | undefined;
  solver: string;
  scorers: string;
  caseLimit: string;
  modelEndpoint: string;
}

/** The POST /evals body the form describes; a field left empty is left out, so the gateway's default applies. */
export function evalStartBody(form: EvalForm): Record<string, unknown> {
  const reviewers = splitList(form.reviewers);
  const common = { ...(form.runId.trim() ? { run_id: form.runId.trim() } : {}), model: form.model.trim(), reviewers };
  if (form.source === 'synthetic') {
    return { ...common, suite: form.suite.trim(), cases: Number(form.cases), fail_fraction: Number(form.failFraction) };
  }
  if (!form.dataset) throw new Error('choose a dataset to evaluate');
  const scorers = splitList(form.scorers);
  return {
    ...common,
    dataset: form.dataset.dataset,
    ...(form.solver ? { solver: form.solver } : {}),
    ...(scorers.length ? { scorers } : {}),
    ...(form.caseLimit.trim() ? { cases: Number(form.caseLimit) } : {}),
    ...(form.modelEndpoint.trim() ? { model_endpoint: form.modelEndpoint.trim() } : {}),
  };
}

/** The gateway's rule for a dataset name (POST /datasets?name=). */
export const DATASET_NAME_PATTERN = '[A-Za-z0-9][A-Za-z0-9._\\-]{0,127}';

/** A name to suggest for an uploaded file: its name without the extension, made to fit DATASET_NAME_PATTERN. */
export function datasetNameFor(fileName: string): string {
  const base = fileName.replace(/\.(jsonl|ndjson|json|txt)$/i, '');
  return base
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 128)
    .replace(/[-.]+$/, '');
}
