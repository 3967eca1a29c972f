import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A GPU tool holds a lease while it works. A finished attempt releases it; a run cancelled while
 * holding one releases it through its saga compensation, so no cancelled run keeps a GPU.
 */
export class GpuLeases1764600000000 implements MigrationInterface {
  name = 'GpuLeases1764600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE gpu_leases (
        idempotency_key text PRIMARY KEY,
        org text NOT NULL,
        run_id text NOT NULL,
        worker text NOT NULL,
        acquired_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX gpu_leases_run ON gpu_leases (org, run_id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE gpu_leases');
  }
}
