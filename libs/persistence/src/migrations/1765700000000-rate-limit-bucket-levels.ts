import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A shared rate limit's bucket keeps levels of its own (requests and tokens, refilled at the bucket's
 * whole rate), beside its shares' levels: a call must find room in both, so the shares together never
 * take more than the rate, however they come and go. Null until the bucket's first call (it then starts
 * with its burst).
 */
export class RateLimitBucketLevels1765700000000 implements MigrationInterface {
  name = 'RateLimitBucketLevels1765700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE rate_limit_buckets
        ADD COLUMN requests double precision NULL,
        ADD COLUMN tokens double precision NULL,
        ADD COLUMN refilled_at timestamptz NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE rate_limit_buckets DROP COLUMN requests, DROP COLUMN tokens, DROP COLUMN refilled_at');
  }
}
