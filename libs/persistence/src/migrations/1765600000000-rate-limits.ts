import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Shared rate limits: one bucket per (model endpoint, key, model), shared by every worker process.
 * `scale` is the bucket's rate as a share of its configured limits, lowered when the provider answers
 * 429 and recovering after; each share (an org's tier of work) keeps its own level of requests and
 * tokens, refilled at its weighted part of the bucket's rate among the shares seen lately.
 */
export class RateLimits1765600000000 implements MigrationInterface {
  name = 'RateLimits1765600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE rate_limit_buckets (
        bucket text PRIMARY KEY,
        scale double precision NOT NULL DEFAULT 1 CHECK (scale > 0 AND scale <= 1),
        shrunk_at timestamptz NULL
      )`);
    await q.query(`
      CREATE TABLE rate_limit_shares (
        bucket text NOT NULL REFERENCES rate_limit_buckets (bucket) ON DELETE CASCADE,
        share text NOT NULL,
        weight double precision NOT NULL CHECK (weight > 0),
        requests double precision NOT NULL,
        tokens double precision NOT NULL,
        refilled_at timestamptz NOT NULL,
        seen_at timestamptz NOT NULL,
        PRIMARY KEY (bucket, share)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE rate_limit_shares');
    await q.query('DROP TABLE rate_limit_buckets');
  }
}
