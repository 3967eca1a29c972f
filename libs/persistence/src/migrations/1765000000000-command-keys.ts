import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Command keys: an org's credential for signing commands on Kafka. The key itself is never stored:
 * it is derived from the server's AGENTRUN_COMMAND_KEY_SECRET and the row's id and org (see
 * deriveCommandKey), so the table alone signs nothing. `key_hash` (SHA-256 of the key) is what was
 * issued, shown as a fingerprint and checked against the key derived at verification, which tells a
 * key issued under an earlier secret from a forged one in the logs. A revoked key keeps its row.
 */
export class CommandKeys1765000000000 implements MigrationInterface {
  name = 'CommandKeys1765000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE command_keys (
        id text PRIMARY KEY,
        org text NOT NULL,
        key_hash text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz
      )`);
    await q.query(`CREATE INDEX command_keys_org ON command_keys (org, created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE command_keys');
  }
}
