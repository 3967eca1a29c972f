import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Who a token speaks for, and browser sessions kept on the server.
 *
 * `api_tokens.subject`: the person or service a token was made for, besides its org. Nullable, so tokens
 * made before it keep working; a token without one can read and write but not approve an eval.
 *
 * `web_sessions`: what POST /session hands a browser is an opaque random id, not the token; only its
 * SHA-256 is stored, so the table does not hold working cookies. A session ends at `expires_at`
 * (absolute), after the idle limit since `last_seen_at`, when `revoked_at` is set (DELETE /session), or
 * when the token it came from is revoked.
 */
export class WebSessions1765100000000 implements MigrationInterface {
  name = 'WebSessions1765100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE api_tokens ADD COLUMN subject text');
    await q.query(`
      CREATE TABLE web_sessions (
        id_hash text PRIMARY KEY,
        org text NOT NULL,
        subject text,
        token_id text NOT NULL REFERENCES api_tokens (id),
        created_at timestamptz NOT NULL DEFAULT now(),
        last_seen_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        revoked_at timestamptz
      )`);
    // Sweeping old rows goes by expiry.
    await q.query('CREATE INDEX web_sessions_expires ON web_sessions (expires_at)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE web_sessions');
    await q.query('ALTER TABLE api_tokens DROP COLUMN subject');
  }
}
