import type { Client } from 'pg';
import { RUN_EVENTS_CHANNEL } from './projection';

/**
 * Subscribes a dedicated connection (not one of the pool's: LISTEN lasts as long as the session) to
 * the notices the projector sends on commit; read each payload back with `parseRunTouches`.
 */
export async function listenForRunTouches(client: Client): Promise<void> {
  await client.query(`LISTEN ${RUN_EVENTS_CHANNEL}`);
}
