import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { stackUrls } from './stack-env';
import { waitFor } from './wait';

/** A new, empty database on the shared Postgres, for one test file. */
export async function freshDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const urls = stackUrls();
  const name = `agentrun_t${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: urls.databaseUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  return {
    name,
    url: urls.databaseUrl(name),
    async drop() {
      const again = new Client({ connectionString: urls.databaseUrl() });
      await again.connect();
      try {
        // FORCE may meet a backend it is not allowed to end (an autovacuum worker on the tables the
        // test just filled, seen once); that worker is gone a moment later, so the drop is tried again.
        await waitFor(`database ${name} to be dropped`, async () => {
          await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
          return true;
        }, 30_000, 250);
      } finally {
        await again.end();
      }
    },
  };
}
