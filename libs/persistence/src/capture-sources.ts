import type { DataSource } from 'typeorm';

/** An effect as a snapshot keeps it, so a fork can reuse it instead of doing it again. */
export interface RecordedEffectRow {
  key: string;
  effect: string;
  attempt: number;
  result: unknown;
}

/** What a snapshot capture reads from Postgres: the effects a run recorded and its events so far. */
export class CaptureSources {
  constructor(private readonly db: DataSource) {}

  /** The newest `limit` effects of one workflow (its idempotency keys start with `workflowId:`), newest first. */
  async recordedEffects(workflowId: string, limit: number): Promise<RecordedEffectRow[]> {
    return this.db.query(
      `SELECT idempotency_key AS key, effect, attempt, result FROM effect_ledger
       WHERE starts_with(idempotency_key, $1) ORDER BY created_at DESC LIMIT $2`,
      [`${workflowId}:`, limit],
    );
  }

  /** Every projected event of a run, in order: the trajectory a snapshot stores. */
  async trajectory(org: string, runId: string): Promise<unknown[]> {
    const rows: { event: unknown }[] = await this.db.query('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId]);
    return rows.map((row) => row.event);
  }
}
