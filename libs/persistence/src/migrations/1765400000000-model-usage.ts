import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One row per model call a run spent (a `step_completed` event with `usage`), for `GET /usage`:
 * keyed like the event it came from, so a replayed event adds nothing. `(org, at)` serves the
 * per-org time ranges every usage question asks.
 */
export class ModelUsage1765400000000 implements MigrationInterface {
  name = 'ModelUsage1765400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE model_usage (
        org text NOT NULL,
        run_id text NOT NULL,
        seq integer NOT NULL,
        step integer NOT NULL,
        model text NOT NULL,
        prompt_tokens bigint NOT NULL CHECK (prompt_tokens >= 0),
        completion_tokens bigint NOT NULL CHECK (completion_tokens >= 0),
        cost_usd numeric(20, 8) NOT NULL CHECK (cost_usd >= 0),
        priced boolean NOT NULL,
        estimated boolean NOT NULL,
        at timestamptz NOT NULL,
        PRIMARY KEY (org, run_id, seq)
      )`);
    await q.query(`CREATE INDEX model_usage_org_at ON model_usage (org, at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE model_usage');
  }
}
