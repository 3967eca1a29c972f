import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { stackUrls } from './stack-env';

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
      await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await again.end();
    },
  };
}
