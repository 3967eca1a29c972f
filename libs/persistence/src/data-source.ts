import { DataSource } from 'typeorm';
import { MIGRATIONS } from './migrations';

export interface DatabaseOptions {
  url: string;
  poolSize: number;
  applicationName: string;
}

export function createDataSource(options: DatabaseOptions): DataSource {
  return new DataSource({
    type: 'postgres',
    url: options.url,
    // Queries are plain SQL in the classes of this lib; TypeORM is the pool, the migrations and the transactions.
    entities: [],
    migrations: MIGRATIONS,
    migrationsRun: false,
    synchronize: false,
    logging: ['error'],
    applicationName: options.applicationName,
    extra: { max: options.poolSize, connectionTimeoutMillis: 5_000 },
  });
}

/** A round trip to the server, for readiness checks. */
export async function pingDatabase(dataSource: DataSource): Promise<void> {
  await dataSource.query('SELECT 1');
}

/** An arbitrary but fixed key: every service that migrates takes the same advisory lock. */
const MIGRATION_LOCK_KEY = 774_211_001;

/**
 * Runs pending migrations once, however many services start at the same moment: the first to take
 * the advisory lock migrates, the rest wait for it and then find nothing pending.
 */
export async function migrate(dataSource: DataSource): Promise<string[]> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      const applied = await dataSource.runMigrations({ transaction: 'all' });
      return applied.map((m) => m.name);
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await runner.release();
  }
}
