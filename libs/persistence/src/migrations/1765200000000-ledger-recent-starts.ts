import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The active-runs quota counts an org's starts accepted in the last minutes whose run is not projected
 * yet (ReadModel.activeRuns). Without this index that reads every accepted command the org ever sent;
 * with it, only the recent ones.
 */
export class LedgerRecentStarts1765200000000 implements MigrationInterface {
  name = 'LedgerRecentStarts1765200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX command_ledger_recent_accepted ON command_ledger (org, decided_at) WHERE outcome = 'accepted'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX command_ledger_recent_accepted');
  }
}
