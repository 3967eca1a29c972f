import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The W3C `traceparent` each run event was published with (its Kafka header), stored with the event
 * so the gateway's SSE frame, read from here and not from Kafka, joins the event's trace. Nullable:
 * events published outside a trace, and every event stored before this, have none.
 */
export class RunEventTraceparent1765300000000 implements MigrationInterface {
  name = 'RunEventTraceparent1765300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE run_events ADD COLUMN traceparent text NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE run_events DROP COLUMN traceparent');
  }
}
