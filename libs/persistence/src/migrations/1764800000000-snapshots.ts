import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The snapshot manifest: one row per `snapshot_captured` event, written by the projector in the same
 * transaction as the event, so the manifest and the event stream cannot disagree. `row` keeps the
 * whole manifest row as published; the columns are what look-ups and forks need.
 */
export class Snapshots1764800000000 implements MigrationInterface {
  name = 'Snapshots1764800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE snapshots (
        org text NOT NULL,
        run_id text NOT NULL,
        snapshot_id text NOT NULL,
        seq integer NOT NULL,
        step integer NOT NULL,
        version integer,
        turn integer,
        is_final boolean NOT NULL,
        capture_status text NOT NULL,
        capture_reason text,
        bundle_object_url text,
        bytes bigint,
        captured_at timestamptz NOT NULL,
        row jsonb NOT NULL,
        PRIMARY KEY (org, run_id, snapshot_id)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE snapshots');
  }
}
