import type { CaseResult } from '@agentrun/contracts';
import type { DataSource } from 'typeorm';

/** A dataset an org stored (uploaded, or given inline to an eval): its cases are in the object store by id. */
export interface StoredDataset {
  id: string;
  name: string;
  origin: 'upload' | 'inline';
  case_count: number;
  bytes: number;
  created_at: string;
}

export interface StoredDatasetWithCases extends StoredDataset {
  case_ids: string[];
}

/** One finished case of an eval run as the read model keeps it. */
export interface CaseResultRow {
  case_id: string;
  status: string;
  score: number | null;
  error_type: string | null;
  attempts: number | null;
  usage: { prompt_tokens: number; completion_tokens: number } | null;
  duration_ms: number | null;
  finished_at: string;
  /** Input, target, output and scores; absent for synthetic cases. */
  result: CaseResult | null;
}

export interface CaseResultFilters {
  status?: string;
  error_type?: string;
  /** Cases where this scorer gave less than 1. */
  scorer_below_1?: string;
}

interface DatasetRecord {
  id: string;
  name: string;
  origin: 'upload' | 'inline';
  case_count: number;
  bytes: string | number;
  case_ids?: string[];
  created_at: Date;
}

const toDataset = (r: DatasetRecord): StoredDataset => ({ id: r.id, name: r.name, origin: r.origin, case_count: r.case_count, bytes: Number(r.bytes), created_at: r.created_at.toISOString() });

/** The datasets and case results of evals, always scoped to one org. */
export class EvalStore {
  constructor(private readonly db: DataSource) {}

  /** Records a stored dataset; storing the same cases under the same name again changes nothing. */
  async saveDataset(org: string, dataset: { id: string; name: string; origin: 'upload' | 'inline'; case_ids: string[]; bytes: number }): Promise<StoredDataset> {
    const rows: DatasetRecord[] = await this.db.query(
      `INSERT INTO eval_datasets (org, id, name, origin, case_count, bytes, case_ids) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (org, name, id) DO UPDATE SET name = excluded.name
       RETURNING id, name, origin, case_count, bytes, created_at`,
      [org, dataset.id, dataset.name, dataset.origin, dataset.case_ids.length, dataset.bytes, JSON.stringify(dataset.case_ids)],
    );
    return toDataset(rows[0]);
  }

  /** Uploaded datasets, newest first (inline ones are kept for their evals, not listed). */
  async listDatasets(org: string, limit = 200): Promise<StoredDataset[]> {
    const rows: DatasetRecord[] = await this.db.query(
      `SELECT id, name, origin, case_count, bytes, created_at FROM eval_datasets WHERE org = $1 AND origin = 'upload' ORDER BY created_at DESC, name LIMIT $2`,
      [org, limit],
    );
    return rows.map(toDataset);
  }

  /** By name: the newest stored under it. By id: any row with those cases. */
  async findDataset(org: string, ref: { name: string } | { id: string }): Promise<StoredDatasetWithCases | undefined> {
    const [column, value] = 'id' in ref ? ['id', ref.id] : ['name', ref.name];
    const rows: DatasetRecord[] = await this.db.query(
      `SELECT id, name, origin, case_count, bytes, case_ids, created_at FROM eval_datasets WHERE org = $1 AND ${column} = $2 ORDER BY created_at DESC LIMIT 1`,
      [org, value],
    );
    return rows[0] ? { ...toDataset(rows[0]), case_ids: rows[0].case_ids ?? [] } : undefined;
  }

  /** A page of a run's finished cases in case-id order, after `afterCaseId`. */
  async caseResults(org: string, runId: string, filters: CaseResultFilters, afterCaseId: string | undefined, limit: number): Promise<{ cases: CaseResultRow[]; next?: string }> {
    const where = ['org = $1', 'run_id = $2'];
    const params: unknown[] = [org, runId];
    const add = (sql: (n: number) => string, value: unknown) => {
      params.push(value);
      where.push(sql(params.length));
    };
    if (filters.status !== undefined) add((n) => `status = $${n}`, filters.status);
    if (filters.error_type !== undefined) add((n) => `error_type = $${n}`, filters.error_type);
    if (filters.scorer_below_1 !== undefined) add((n) => `EXISTS (SELECT 1 FROM jsonb_array_elements(result->'scores') s WHERE s->>'scorer' = $${n} AND (s->>'value')::float8 < 1)`, filters.scorer_below_1);
    if (afterCaseId !== undefined) add((n) => `case_id > $${n}`, afterCaseId);
    params.push(limit + 1);
    const rows: (Omit<CaseResultRow, 'usage' | 'finished_at'> & { prompt_tokens: number | null; completion_tokens: number | null; finished_at: Date })[] = await this.db.query(
      `SELECT case_id, status, score, error_type, attempts, prompt_tokens, completion_tokens, duration_ms, result, finished_at
       FROM eval_case_results WHERE ${where.join(' AND ')} ORDER BY case_id LIMIT $${params.length}`,
      params,
    );
    const page = rows.slice(0, limit).map(({ prompt_tokens, completion_tokens, finished_at, ...r }) => ({
      ...r,
      usage: prompt_tokens === null && completion_tokens === null ? null : { prompt_tokens: prompt_tokens ?? 0, completion_tokens: completion_tokens ?? 0 },
      finished_at: finished_at.toISOString(),
    }));
    return rows.length > limit ? { cases: page, next: page[page.length - 1].case_id } : { cases: page };
  }

  /** Every finished case's score (null when ungraded), for a comparison. */
  async caseScores(org: string, runId: string): Promise<{ case_id: string; score: number | null }[]> {
    const rows: { case_id: string; status: string; score: number | null }[] = await this.db.query(
      'SELECT case_id, status, score FROM eval_case_results WHERE org = $1 AND run_id = $2 ORDER BY case_id',
      [org, runId],
    );
    return rows.map((r) => ({ case_id: r.case_id, score: r.status === 'ungraded' ? null : r.score }));
  }
}
