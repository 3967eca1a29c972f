import type { CommandOutcome, Outcome } from '@agentrun/contracts';
import type { DataSource } from 'typeorm';

export type CommandClaim =
  | { state: 'new' }
  /** Seen before and decided: the answer is `duplicate`. */
  | { state: 'decided'; outcome: Outcome; reason: string | null }
  /** Seen before but never decided (a crash between claim and decision): decide it again. */
  | { state: 'undecided' };

export class CommandLedger {
  constructor(private readonly db: DataSource) {}

  async claim(org: string, commandId: string, type: string, runId: string): Promise<CommandClaim> {
    const inserted: unknown[] = await this.db.query(
      `INSERT INTO command_ledger (org, command_id, type, run_id) VALUES ($1, $2, $3, $4)
       ON CONFLICT (org, command_id) DO NOTHING RETURNING command_id`,
      [org, commandId, type, runId],
    );
    if (inserted.length) return { state: 'new' };
    const rows: { outcome: Outcome | null; reason: string | null }[] = await this.db.query(
      'SELECT outcome, reason FROM command_ledger WHERE org = $1 AND command_id = $2',
      [org, commandId],
    );
    const row = rows[0];
    return row?.outcome ? { state: 'decided', outcome: row.outcome, reason: row.reason } : { state: 'undecided' };
  }

  async decide(outcome: CommandOutcome): Promise<void> {
    await this.db.query(
      `UPDATE command_ledger SET outcome = $3, reason = $4, message = $5, decided_at = now()
       WHERE org = $1 AND command_id = $2 AND outcome IS NULL`,
      [outcome.org, outcome.command_id, outcome.outcome, outcome.reason ?? null, outcome.message ?? null],
    );
  }

  async countApplied(org: string, commandId: string): Promise<number> {
    const rows: { n: string }[] = await this.db.query(
      `SELECT count(*) AS n FROM command_ledger WHERE org = $1 AND command_id = $2 AND outcome = 'accepted'`,
      [org, commandId],
    );
    return Number(rows[0]?.n ?? 0);
  }
}


export interface RecordedEffect<T> {
  result: T;
  attempt: number;
  /** True when the effect had already happened: nothing was spent this time. */
  duplicate: boolean;
}

/** The effect ledger: one row per idempotency key, written when the effect is done. */
export class EffectLedger {
  constructor(private readonly db: DataSource) {}

  async find<T>(key: string): Promise<RecordedEffect<T> | undefined> {
    const rows: { result: T; attempt: number }[] = await this.db.query(
      'SELECT result, attempt FROM effect_ledger WHERE idempotency_key = $1',
      [key],
    );
    return rows[0] ? { result: rows[0].result, attempt: rows[0].attempt, duplicate: true } : undefined;
  }

  /** Records an effect; if another attempt recorded it first, that one wins and is returned. */
  async record<T>(key: string, effect: string, result: T, attempt: number): Promise<RecordedEffect<T>> {
    const rows: unknown[] = await this.db.query(
      `INSERT INTO effect_ledger (idempotency_key, effect, result, attempt) VALUES ($1, $2, $3::jsonb, $4)
       ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key`,
      [key, effect, JSON.stringify(result), attempt],
    );
    if (rows.length) return { result, attempt, duplicate: false };
    const existing = await this.find<T>(key);
    if (!existing) throw new Error(`effect ledger row ${key} vanished`);
    return existing;
  }

  async count(keyPrefix: string): Promise<number> {
    const rows: { n: string }[] = await this.db.query(
      `SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)`,
      [keyPrefix],
    );
    return Number(rows[0]?.n ?? 0);
  }
}
