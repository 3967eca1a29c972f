import type { CommandOutcome, Outcome } from '@agentrun/contracts';
import type { DataSource } from 'typeorm';

export interface DecidedCommand {
  outcome: Outcome;
  reason: string | null;
  message: string | null;
  source: string | null;
  decided_at: Date;
}

export type CommandClaim =
  /** Ours to decide: never seen, or seen but left undecided by a handler whose lease ran out. */
  | { state: 'claimed' }
  /** Seen before and decided. */
  | { state: 'decided'; decided: DecidedCommand }
  /** Another handler holds a fresh lease on it right now. */
  | { state: 'busy' };

/** How long a handler may take to decide a command before another may take it over. */
const CLAIM_LEASE_SECONDS = 30;

export class CommandLedger {
  constructor(private readonly db: DataSource) {}

  async claim(org: string, commandId: string, type: string, runId: string, source: string | null): Promise<CommandClaim> {
    const claimed: unknown[] = await this.db.query(
      `INSERT INTO command_ledger AS l (org, command_id, type, run_id, source) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (org, command_id) DO UPDATE SET claimed_at = now()
         WHERE l.outcome IS NULL AND l.claimed_at < now() - make_interval(secs => $6)
       RETURNING command_id`,
      [org, commandId, type, runId, source, CLAIM_LEASE_SECONDS],
    );
    if (claimed.length) return { state: 'claimed' };
    const rows: DecidedCommand[] = await this.db.query(
      'SELECT outcome, reason, message, source, decided_at FROM command_ledger WHERE org = $1 AND command_id = $2',
      [org, commandId],
    );
    const row = rows[0];
    return row?.outcome ? { state: 'decided', decided: row } : { state: 'busy' };
  }

  /** Gives up a claim without deciding (Temporal was out of reach), so a retry may take it at once. */
  async release(org: string, commandId: string): Promise<void> {
    await this.db.query(
      `UPDATE command_ledger SET claimed_at = '-infinity' WHERE org = $1 AND command_id = $2 AND outcome IS NULL`,
      [org, commandId],
    );
  }

  async decide(outcome: CommandOutcome): Promise<void> {
    await this.db.query(
      `UPDATE command_ledger SET outcome = $3, reason = $4, message = $5, decided_at = now()
       WHERE org = $1 AND command_id = $2 AND outcome IS NULL`,
      [outcome.org, outcome.command_id, outcome.outcome, outcome.reason ?? null, outcome.message ?? null],
    );
  }

  /** Marks a run started on behalf of another command (retry-failed) as taken, like a start command. */
  async recordStart(org: string, commandId: string, runId: string): Promise<void> {
    await this.db.query(
      `INSERT INTO command_ledger (org, command_id, type, run_id, outcome, decided_at) VALUES ($1, $2, 'eval.start', $3, 'accepted', now())
       ON CONFLICT (org, command_id) DO NOTHING`,
      [org, `${commandId}#start`, runId],
    );
  }

  /** The command id of the accepted start of this run, if it ever had one (outlives Temporal's retention). */
  async acceptedStart(org: string, runId: string): Promise<string | undefined> {
    const rows: { command_id: string }[] = await this.db.query(
      `SELECT command_id FROM command_ledger WHERE org = $1 AND run_id = $2 AND outcome = 'accepted' AND (type LIKE '%.start' OR type = 'agent.fork') LIMIT 1`,
      [org, runId],
    );
    return rows[0]?.command_id;
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

/** GPU leases: taken by a GPU tool for the length of its work, released by it or by compensation. */
export class GpuLeases {
  constructor(private readonly db: DataSource) {}

  async acquire(key: string, org: string, runId: string, worker: string): Promise<void> {
    await this.db.query(
      `INSERT INTO gpu_leases (idempotency_key, org, run_id, worker) VALUES ($1, $2, $3, $4)
       ON CONFLICT (idempotency_key) DO UPDATE SET worker = excluded.worker, acquired_at = now()`,
      [key, org, runId, worker],
    );
  }

  /** Idempotent: releasing twice is releasing once. Returns whether a lease was held. */
  async release(key: string): Promise<boolean> {
    // For DELETE, TypeORM answers [rows, affected count].
    const [, deleted] = (await this.db.query('DELETE FROM gpu_leases WHERE idempotency_key = $1', [key])) as [unknown[], number];
    return deleted > 0;
  }

  async heldBy(org: string, runId: string): Promise<string[]> {
    const rows: { idempotency_key: string }[] = await this.db.query(
      'SELECT idempotency_key FROM gpu_leases WHERE org = $1 AND run_id = $2 ORDER BY acquired_at',
      [org, runId],
    );
    return rows.map((r) => r.idempotency_key);
  }
}
