import { Client } from 'pg';
import { pgClientConfig, type DatabaseOptions } from './data-source';
import { RUN_EVENTS_CHANNEL } from './projection';

/** The LISTEN connection, with the same password, TLS and statement timeout as the service's pool. */
export function runTouchClient(options: DatabaseOptions): Client {
  return new Client(pgClientConfig(options));
}

/**
 * Subscribes a dedicated connection (not one of the pool's: LISTEN lasts as long as the session) to
 * the notices the projector sends on commit; read each payload back with `parseRunTouches`.
 */
export async function listenForRunTouches(client: Client): Promise<void> {
  await client.query(`LISTEN ${RUN_EVENTS_CHANNEL}`);
}
