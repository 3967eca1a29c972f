import type { RunStateRecord } from '@agentrun/contracts';
import type { DataSource } from 'typeorm';

/**
 * The committed state of each named run, read in one query. The read model only moves forward in
 * seq, so what this returns never goes back, however often a batch is replayed. Runs without a row
 * are left out.
 */
export async function readRunStates(dataSource: DataSource, runs: { org: string; run_id: string }[]): Promise<RunStateRecord[]> {
  if (runs.length === 0) return [];
  const rows: (Omit<RunStateRecord, 'seq'> & { seq: number | string })[] = await dataSource.query(
    `SELECT r.org, r.run_id, r.kind, e.seq, e.type, r.status, e.event->>'ts' AS ts,
            COALESCE(e.event->'payload'->'state', r.state) AS state
     FROM unnest($1::text[], $2::text[]) AS k(org, run_id)
     JOIN runs r ON r.org = k.org AND r.run_id = k.run_id
     JOIN run_events e ON e.org = r.org AND e.run_id = r.run_id AND e.seq = r.last_seq`,
    [runs.map((r) => r.org), runs.map((r) => r.run_id)],
  );
  return rows.map((row) => ({ ...row, seq: Number(row.seq) }));
}
