import type { MigrationInterface, QueryRunner } from 'typeorm';

export class ReadModel1764400000000 implements MigrationInterface {
  name = 'ReadModel1764400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE runs (
        org text NOT NULL,
        run_id text NOT NULL,
        kind text NOT NULL,
        status text NOT NULL,
        state jsonb NOT NULL,
        state_seq integer NOT NULL,
        last_seq integer NOT NULL,
        first_seq integer NOT NULL,
        model text,
        parent_run_id text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (org, run_id)
      )`);
    await q.query(`CREATE INDEX runs_org_created ON runs (org, created_at DESC, run_id DESC)`);
    await q.query(`CREATE INDEX runs_org_status_created ON runs (org, status, created_at DESC, run_id DESC)`);
    await q.query(`
      CREATE TABLE run_events (
        org text NOT NULL,
        run_id text NOT NULL,
        seq integer NOT NULL,
        type text NOT NULL,
        ts timestamptz NOT NULL,
        event jsonb NOT NULL,
        projected_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (org, run_id, seq)
      )`);
    await q.query(`
      CREATE TABLE command_ledger (
        org text NOT NULL,
        command_id text NOT NULL,
        type text NOT NULL,
        run_id text NOT NULL,
        outcome text,
        reason text,
        message text,
        received_at timestamptz NOT NULL DEFAULT now(),
        decided_at timestamptz,
        PRIMARY KEY (org, command_id)
      )`);
    await q.query(`
      CREATE TABLE effect_ledger (
        idempotency_key text PRIMARY KEY,
        effect text NOT NULL,
        result jsonb NOT NULL,
        attempt integer NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE effect_ledger');
    await q.query('DROP TABLE command_ledger');
    await q.query('DROP TABLE run_events');
    await q.query('DROP TABLE runs');
  }
}
