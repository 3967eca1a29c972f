import { readFileSync } from 'node:fs';
import type { ClientConfig } from 'pg';
import { DataSource } from 'typeorm';
import { MIGRATIONS } from './migrations';

/**
 * TLS toward Postgres with libpq's meanings, which node-postgres's own `sslmode` parsing no longer
 * follows: `require` encrypts without checking the certificate, `verify-ca` checks it against the CA
 * but not the host name, `verify-full` checks both.
 */
export type SslMode = 'disable' | 'require' | 'verify-ca' | 'verify-full';

export interface DatabaseOptions {
  url: string;
  poolSize: number;
  applicationName: string;
  /** Overrides the URL's password. */
  password?: string;
  /** Undefined: the URL's `sslmode`, else `disable`. */
  sslMode?: SslMode;
  sslCaFile?: string;
  sslCertFile?: string;
  sslKeyFile?: string;
  /** Per connection; 0 or undefined: none. */
  statementTimeoutMs?: number;
}

/** The database settings of a service's config (the `databaseSpec` group), by name. */
export interface DatabaseSettings {
  DATABASE_URL: string;
  DATABASE_POOL_SIZE: number;
  DATABASE_PASSWORD?: string;
  DATABASE_SSLMODE?: SslMode;
  DATABASE_SSL_CA_FILE?: string;
  DATABASE_SSL_CERT_FILE?: string;
  DATABASE_SSL_KEY_FILE?: string;
  DATABASE_STATEMENT_TIMEOUT_MS: number;
}

export function databaseOptionsFrom(config: DatabaseSettings, applicationName: string): DatabaseOptions {
  return {
    url: config.DATABASE_URL,
    poolSize: config.DATABASE_POOL_SIZE,
    applicationName,
    password: config.DATABASE_PASSWORD,
    sslMode: config.DATABASE_SSLMODE,
    sslCaFile: config.DATABASE_SSL_CA_FILE,
    sslCertFile: config.DATABASE_SSL_CERT_FILE,
    sslKeyFile: config.DATABASE_SSL_KEY_FILE,
    statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
  };
}

export type PgTls = false | { rejectUnauthorized: boolean; ca?: Buffer; cert?: Buffer; key?: Buffer; checkServerIdentity?: () => undefined };

/** A connection's address and TLS, in node-postgres's options; the one mapping the pool and the LISTEN connection share. */
export interface PgConnection {
  connectionString: string;
  ssl: PgTls;
  statementTimeoutMs?: number;
}

const URL_TLS_PARAMS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'ssl', 'uselibpqcompat'];

type FileReader = (path: string) => Buffer;

function readSetting(read: FileReader, setting: string, path: string): Buffer {
  try {
    return read(path);
  } catch (err) {
    throw new Error(`${setting}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/**
 * Applies the password and TLS settings to the URL. TLS parameters are taken out of the URL, since
 * node-postgres would let them override the `ssl` option; their values serve as defaults here.
 */
export function pgConnection(options: DatabaseOptions, read: FileReader = readFileSync): PgConnection {
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    throw new Error('DATABASE_URL is not a valid URL (postgres://user:password@host:port/database)');
  }
  const fromUrl = Object.fromEntries(URL_TLS_PARAMS.map((p) => [p, url.searchParams.get(p) ?? undefined]));
  for (const p of URL_TLS_PARAMS) url.searchParams.delete(p);
  if (options.password !== undefined) url.password = encodeURIComponent(options.password);

  const urlMode = fromUrl.sslmode ?? (fromUrl.ssl === 'true' || fromUrl.ssl === '1' ? 'verify-full' : undefined);
  const mode = options.sslMode ?? urlMode ?? 'disable';
  if (!['disable', 'require', 'verify-ca', 'verify-full'].includes(mode))
    throw new Error(`DATABASE_URL: sslmode=${mode} is not supported; use disable, require, verify-ca or verify-full (or set DATABASE_SSLMODE)`);
  const caFile = options.sslCaFile ?? fromUrl.sslrootcert;
  const certFile = options.sslCertFile ?? fromUrl.sslcert;
  const keyFile = options.sslKeyFile ?? fromUrl.sslkey;
  if ((certFile === undefined) !== (keyFile === undefined))
    throw new Error('DATABASE_SSL_CERT_FILE and DATABASE_SSL_KEY_FILE go together: set both for a client certificate, or neither');

  let ssl: PgTls = false;
  if (mode === 'disable') {
    const files = [caFile && 'DATABASE_SSL_CA_FILE', certFile && 'DATABASE_SSL_CERT_FILE'].filter(Boolean);
    if (files.length) throw new Error(`DATABASE_SSLMODE is disable but ${files.join(', ')} is set: set DATABASE_SSLMODE to require, verify-ca or verify-full`);
  } else {
    ssl = { rejectUnauthorized: mode !== 'require' };
    if (caFile) ssl.ca = readSetting(read, 'DATABASE_SSL_CA_FILE', caFile);
    if (certFile && keyFile) {
      ssl.cert = readSetting(read, 'DATABASE_SSL_CERT_FILE', certFile);
      ssl.key = readSetting(read, 'DATABASE_SSL_KEY_FILE', keyFile);
    }
    // verify-ca trusts any certificate the CA signed, whatever name it carries.
    if (mode === 'verify-ca') ssl.checkServerIdentity = () => undefined;
  }
  const statementTimeoutMs = options.statementTimeoutMs ? options.statementTimeoutMs : undefined;
  return { connectionString: url.toString(), ssl, statementTimeoutMs };
}

/** A single connection's options (LISTEN needs its own session), with the pool's TLS and timeout. */
export function pgClientConfig(options: DatabaseOptions, read?: FileReader): ClientConfig {
  const c = pgConnection(options, read);
  return { connectionString: c.connectionString, ssl: c.ssl, statement_timeout: c.statementTimeoutMs, application_name: options.applicationName };
}

export function createDataSource(options: DatabaseOptions): DataSource {
  const c = pgConnection(options);
  return new DataSource({
    type: 'postgres',
    url: c.connectionString,
    ssl: c.ssl,
    // Queries are plain SQL in the classes of this lib; TypeORM is the pool, the migrations and the transactions.
    entities: [],
    migrations: MIGRATIONS,
    migrationsRun: false,
    synchronize: false,
    logging: ['error'],
    applicationName: options.applicationName,
    extra: { max: options.poolSize, connectionTimeoutMillis: 5_000, ...(c.statementTimeoutMs ? { statement_timeout: c.statementTimeoutMs } : {}) },
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

/** The migrations this build ships, oldest first. */
export function shippedMigrations(): string[] {
  return MIGRATIONS.map((m) => m.name);
}

/** Where the database's schema stands against this build's migrations. */
export interface SchemaComparison {
  /** Shipped migrations the database has not applied: the schema is older than this build. */
  pending: string[];
  /** Applied migrations this build does not know: a newer build has migrated (a rolling deploy). */
  unknown: string[];
}

export function compareSchema(applied: string[], shipped: string[]): SchemaComparison {
  const done = new Set(applied);
  const known = new Set(shipped);
  return { pending: shipped.filter((m) => !done.has(m)), unknown: applied.filter((m) => !known.has(m)) };
}

/** A database this build cannot run against; the message says what to run. */
export class SchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SchemaError';
    this.stack = `${this.name}: ${message}`;
  }
}

/** The refusal for an older schema, naming where it is and where this build needs it. */
export function schemaVerdict(applied: string[], shipped: string[]): { error?: string; warning?: string } {
  const { pending, unknown } = compareSchema(applied, shipped);
  const at = applied.length ? applied[applied.length - 1] : 'empty (no migrations applied)';
  const result: { error?: string; warning?: string } = {};
  if (pending.length)
    result.error = `the database schema is at ${at}, this build needs ${shipped[shipped.length - 1]} (pending: ${pending.join(', ')}): run \`npm run migrate\``;
  if (unknown.length) result.warning = `the database has migrations this build does not know (${unknown.join(', ')}): a newer build has migrated it`;
  return result;
}

/** The migrations the database has applied, in order; none when the migrations table does not exist yet. */
export async function appliedMigrations(dataSource: DataSource): Promise<string[]> {
  const table = dataSource.options.migrationsTableName ?? 'migrations';
  const exists: { t: string | null }[] = await dataSource.query('SELECT to_regclass($1)::text AS t', [table]);
  if (!exists[0]?.t) return [];
  const rows: { name: string }[] = await dataSource.query(`SELECT name FROM "${table}" ORDER BY "timestamp", id`);
  return rows.map((r) => r.name);
}

/**
 * Compares the schema with this build without locking or changing anything: throws on an older
 * schema, returns a warning for a newer one (an older build still running beside a newer one).
 */
export async function checkSchema(dataSource: DataSource): Promise<string | undefined> {
  const verdict = schemaVerdict(await appliedMigrations(dataSource), shippedMigrations());
  if (verdict.error) throw new SchemaError(verdict.error);
  return verdict.warning;
}
