import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A claim on a command is a lease (`claimed_at`), so two handlers never decide one command at once;
 * `source` remembers where a Kafka command was read, so a redelivery of that same message re-sends
 * the first outcome instead of reporting itself as a duplicate.
 */
export class CommandLedgerClaims1764500000000 implements MigrationInterface {
  name = 'CommandLedgerClaims1764500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE command_ledger ADD COLUMN source text, ADD COLUMN claimed_at timestamptz NOT NULL DEFAULT now()`);
    await q.query(`CREATE INDEX command_ledger_accepted_starts ON command_ledger (org, run_id) WHERE outcome = 'accepted' AND type LIKE '%.start'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX command_ledger_accepted_starts');
    await q.query('ALTER TABLE command_ledger DROP COLUMN claimed_at, DROP COLUMN source');
  }
}
