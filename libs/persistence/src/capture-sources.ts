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

  /**
   * The last seq of the run's events after `afterSeq` with no gap before it (`afterSeq` when the next
   * one is not in yet). A segment ends there, so an event projected late into a gap is never skipped
   * by the segment after it. Read through the primary key, never the events themselves.
   */
  async contiguousEnd(org: string, runId: string, afterSeq: number): Promise<number> {
    const [span]: { n: string; hi: string | null }[] = await this.db.query(
      'SELECT count(*) AS n, max(seq) AS hi FROM run_events WHERE org = $1 AND run_id = $2 AND seq > $3',
      [org, runId, afterSeq],
    );
    const n = Number(span.n);
    if (n === 0 || span.hi === null) return afterSeq;
    if (Number(span.hi) - afterSeq === n) return Number(span.hi);
    // A gap: the end is the first event whose successor is missing, if the prefix starts right after.
    const [gap]: { end: string | null }[] = await this.db.query(
      `SELECT min(e.seq) AS end FROM run_events e
       WHERE e.org = $1 AND e.run_id = $2 AND e.seq > $3
         AND NOT EXISTS (SELECT 1 FROM run_events x WHERE x.org = e.org AND x.run_id = e.run_id AND x.seq = e.seq + 1)`,
      [org, runId, afterSeq],
    );
    const [first]: { seq: string }[] = await this.db.query('SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 AND seq = $3', [org, runId, afterSeq + 1]);
    return first && gap.end !== null ? Number(gap.end) : afterSeq;
  }

  /**
   * The run's events `afterSeq + 1`..`lastSeq` in seq order, `pageSize` rows per query, so a capture
   * holds one page in memory however long the run is.
   */
  async *trajectoryPages(org: string, runId: string, afterSeq: number, lastSeq: number, pageSize = 500): AsyncGenerator<{ seq: number; event: unknown }[]> {
    let cursor = afterSeq;
    while (cursor < lastSeq) {
      const rows: { seq: string; event: unknown }[] = await this.db.query(
        'SELECT seq, event FROM run_events WHERE org = $1 AND run_id = $2 AND seq > $3 AND seq <= $4 ORDER BY seq LIMIT $5',
        [org, runId, cursor, lastSeq, pageSize],
      );
      if (!rows.length) return;
      const page = rows.map((row) => ({ seq: Number(row.seq), event: row.event }));
      cursor = page[page.length - 1].seq;
      yield page;
    }
  }
}
