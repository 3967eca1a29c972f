import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * API tokens: each names one org. Only a SHA-256 hash of the token is stored, so a leaked table
 * does not leak working tokens; a revoked token keeps its row (and its audit trail) but no longer
 * authenticates.
 */
export class ApiTokens1764700000000 implements MigrationInterface {
  name = 'ApiTokens1764700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE api_tokens (
        id text PRIMARY KEY,
        org text NOT NULL,
        token_hash text NOT NULL UNIQUE,
        label text,
        created_at timestamptz DEFAULT now(),
        revoked_at timestamptz
      )`);
    await q.query(`CREATE INDEX api_tokens_org ON api_tokens (org, created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE api_tokens');
  }
}
