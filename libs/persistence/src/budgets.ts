import type { BudgetShortfall } from '@agentrun/contracts';
import type { DataSource, EntityManager } from 'typeorm';

/** A run's own limits, as its state carries them. */
export interface RunLimits {
  max_tokens?: number;
  max_cost_usd?: number;
}

/** One model call's worst case, reserved before it is made. */
export interface ReservationRequest {
  /** The call's effect key: a retried call finds its reservation instead of making a second. */
  key: string;
  org: string;
  run_id: string;
  tokens: number;
  usd: number;
}


export type ReserveResult = { ok: true; existing: boolean } | { ok: false; shortfall: BudgetShortfall };

/** An org's monthly budget and where it stands this month (UTC). */
export interface OrgBudgetStanding {
  org: string;
  monthly_usd: number;
  spent_usd: number;
  reserved_usd: number;
  updated_at: Date;
}

type Sums = { spent_tokens: string; reserved_tokens: string; spent_usd: string; reserved_usd: string };

const SUMS = `coalesce(sum(tokens) FILTER (WHERE settled), 0)::text AS spent_tokens,
  coalesce(sum(reserved_tokens) FILTER (WHERE NOT settled), 0)::text AS reserved_tokens,
  coalesce(sum(usd) FILTER (WHERE settled), 0)::text AS spent_usd,
  coalesce(sum(reserved_usd) FILTER (WHERE NOT settled), 0)::text AS reserved_usd`;

/** Dollars as Postgres numeric(20, 8) keeps them. */
const usdText = (usd: number) => usd.toFixed(8);
const round8 = (n: number) => Math.round(n * 1e8) / 1e8;

/** The first day of `at`'s month, UTC, as a date. */
export function monthOf(at: Date): string {
  return `${at.toISOString().slice(0, 7)}-01`;
}

/**
 * The reservation ledger and the orgs' monthly budgets. Before a model call its worst case is reserved
 * against the run's limits and its org's monthly budget, one org at a time (a transaction-scoped
 * advisory lock), so two calls cannot both take the last of a budget; after the call the reservation
 * settles to what the call used. Spent is settled calls; reserved is calls in flight.
 */
export class BudgetLedger {
  constructor(private readonly db: DataSource) {}

  async reserve(request: ReservationRequest, limits: RunLimits, now = new Date()): Promise<ReserveResult> {
    return this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('agentrun budget ' || $1))`, [request.org]);
      const existing: unknown[] = await tx.query('SELECT 1 FROM budget_reservations WHERE key = $1', [request.key]);
      if (existing.length) return { ok: true, existing: true } as const;
      const month = monthOf(now);
      if (limits.max_tokens !== undefined || limits.max_cost_usd !== undefined) {
        const [run]: Sums[] = await tx.query(`SELECT ${SUMS} FROM budget_reservations WHERE org = $1 AND run_id = $2`, [request.org, request.run_id]);
        if (limits.max_tokens !== undefined) {
          const short = budgetShortfall('run', 'tokens', limits.max_tokens, Number(run.spent_tokens), Number(run.reserved_tokens), request.tokens);
          if (short) return short;
        }
        if (limits.max_cost_usd !== undefined) {
          const short = budgetShortfall('run', 'usd', limits.max_cost_usd, Number(run.spent_usd), Number(run.reserved_usd), request.usd);
          if (short) return short;
        }
      }
      const budget = await this.monthlyOf(tx, request.org);
      if (budget !== undefined) {
        const [org]: Sums[] = await tx.query(`SELECT ${SUMS} FROM budget_reservations WHERE org = $1 AND month = $2`, [request.org, month]);
        const short = budgetShortfall('org', 'usd', budget, Number(org.spent_usd), Number(org.reserved_usd), request.usd);
        if (short) return short;
      }
      await tx.query(
        `INSERT INTO budget_reservations (key, org, run_id, month, reserved_tokens, reserved_usd) VALUES ($1, $2, $3, $4, $5, $6)`,
        [request.key, request.org, request.run_id, month, request.tokens, usdText(request.usd)],
      );
      return { ok: true, existing: false } as const;
    });
  }

  /** The call's real use replaces its reservation; settling again changes nothing. */
  async settle(key: string, tokens: number, usd: number): Promise<void> {
    await this.db.query(`UPDATE budget_reservations SET settled = true, tokens = $2, usd = $3, settled_at = now() WHERE key = $1 AND NOT settled`, [key, tokens, usdText(usd)]);
  }

  /** A call that will not be made (refused for good): its reservation frees what it held. */
  async release(key: string): Promise<void> {
    await this.settle(key, 0, 0);
  }

  /** What a run has spent and holds, for the figures of a refusal and for tests. */
  async runStanding(org: string, runId: string): Promise<{ spent_tokens: number; reserved_tokens: number; spent_usd: number; reserved_usd: number; reservations: number }> {
    const [row]: (Sums & { n: number })[] = await this.db.query(`SELECT ${SUMS}, count(*)::int AS n FROM budget_reservations WHERE org = $1 AND run_id = $2`, [org, runId]);
    return { spent_tokens: Number(row.spent_tokens), reserved_tokens: Number(row.reserved_tokens), spent_usd: Number(row.spent_usd), reserved_usd: Number(row.reserved_usd), reservations: row.n };
  }

  async setOrgBudget(org: string, monthlyUsd: number): Promise<void> {
    await this.db.query(
      `INSERT INTO org_budgets (org, monthly_usd) VALUES ($1, $2) ON CONFLICT (org) DO UPDATE SET monthly_usd = excluded.monthly_usd, updated_at = now()`,
      [org, usdText(monthlyUsd)],
    );
  }

  /** True when the org had a budget. */
  async clearOrgBudget(org: string): Promise<boolean> {
    const rows: unknown[] = await this.db.query('DELETE FROM org_budgets WHERE org = $1 RETURNING org', [org]);
    return rows.length > 0;
  }

  /** Every org with a budget (or one), with this month's spend and reservations. */
  async orgBudgets(org?: string, now = new Date()): Promise<OrgBudgetStanding[]> {
    const rows: { org: string; monthly_usd: string; updated_at: Date; spent_usd: string; reserved_usd: string }[] = await this.db.query(
      `SELECT b.org, b.monthly_usd::text, b.updated_at,
         coalesce((SELECT sum(usd) FROM budget_reservations r WHERE r.org = b.org AND r.month = $1 AND r.settled), 0)::text AS spent_usd,
         coalesce((SELECT sum(reserved_usd) FROM budget_reservations r WHERE r.org = b.org AND r.month = $1 AND NOT r.settled), 0)::text AS reserved_usd
       FROM org_budgets b WHERE $2::text IS NULL OR b.org = $2 ORDER BY b.org`,
      [monthOf(now), org ?? null],
    );
    return rows.map((r) => ({ org: r.org, monthly_usd: Number(r.monthly_usd), spent_usd: Number(r.spent_usd), reserved_usd: Number(r.reserved_usd), updated_at: r.updated_at }));
  }

  private async monthlyOf(tx: EntityManager, org: string): Promise<number | undefined> {
    const rows: { monthly_usd: string }[] = await tx.query('SELECT monthly_usd::text FROM org_budgets WHERE org = $1', [org]);
    return rows[0] ? Number(rows[0].monthly_usd) : undefined;
  }
}

/**
 * Whether a call needing `needed` fits a limit of `max` with `spent` settled and `reserved` in flight:
 * undefined when it does, else the refusal with its figures (dollars to the ledger's precision).
 */
export function budgetShortfall(scope: 'run' | 'org', limit: 'tokens' | 'usd', max: number, spent: number, reserved: number, needed: number): { ok: false; shortfall: BudgetShortfall } | undefined {
  if (spent + reserved + needed <= max + (limit === 'usd' ? 1e-9 : 0)) return undefined;
  const left = Math.max(0, max - spent - reserved);
  return { ok: false, shortfall: { scope, limit, max, spent: round8(spent), reserved: round8(reserved), needed: round8(needed), left: round8(left) } };
}
