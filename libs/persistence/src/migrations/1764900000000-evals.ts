import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Real evaluations: the datasets an org has stored (their cases live in the object store, by content
 * hash), and one row per finished case of an eval run, written by the projector from `case_finished`
 * in the same transaction as the event.
 */
export class Evals1764900000000 implements MigrationInterface {
  name = 'Evals1764900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE eval_datasets (
        org text NOT NULL,
        id text NOT NULL,
        name text NOT NULL,
        origin text NOT NULL,
        case_count integer NOT NULL,
        bytes bigint NOT NULL,
        case_ids jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (org, name, id)
      )`);
    await q.query('CREATE INDEX eval_datasets_by_id ON eval_datasets (org, id)');
    await q.query('CREATE INDEX eval_datasets_newest ON eval_datasets (org, name, created_at DESC)');
    await q.query(`
      CREATE TABLE eval_case_results (
        org text NOT NULL,
        run_id text NOT NULL,
        case_id text NOT NULL,
        seq integer NOT NULL,
        status text NOT NULL,
        score double precision,
        error_type text,
        attempts integer,
        prompt_tokens integer,
        completion_tokens integer,
        duration_ms integer,
        result jsonb,
        finished_at timestamptz NOT NULL,
        PRIMARY KEY (org, run_id, case_id)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE eval_case_results');
    await q.query('DROP TABLE eval_datasets');
  }
}
