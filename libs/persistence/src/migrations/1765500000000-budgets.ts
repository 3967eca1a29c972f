import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Budgets: each org's monthly limit in US dollars (`npm run budget`), and the reservation ledger every
 * model call goes through. A reservation is keyed by the call's effect key, so a retried call reserves
 * once; it holds the call's worst case until the call settles to what it really used. `(org, month)`
 * and `(org, run_id)` serve the two sums a reservation checks against.
 */
export class Budgets1765500000000 implements MigrationInterface {
  name = 'Budgets1765500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE org_budgets (
        org text PRIMARY KEY,
        monthly_usd numeric(20, 8) NOT NULL CHECK (monthly_usd > 0),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE budget_reservations (
        key text PRIMARY KEY,
        org text NOT NULL,
        run_id text NOT NULL,
        month date NOT NULL,
        reserved_tokens bigint NOT NULL CHECK (reserved_tokens >= 0),
        reserved_usd numeric(20, 8) NOT NULL CHECK (reserved_usd >= 0),
        settled boolean NOT NULL DEFAULT false,
        tokens bigint NULL,
        usd numeric(20, 8) NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        settled_at timestamptz NULL
      )`);
    await q.query(`CREATE INDEX budget_reservations_org_month ON budget_reservations (org, month)`);
    await q.query(`CREATE INDEX budget_reservations_org_run ON budget_reservations (org, run_id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE budget_reservations');
    await q.query('DROP TABLE org_budgets');
  }
}
