import { compareSchema, pgClientConfig, pgConnection, schemaVerdict, type DatabaseOptions } from './data-source';

const files: Record<string, string> = { '/certs/ca.pem': 'CA', '/certs/client.pem': 'CRT', '/certs/client.key': 'KEY' };
const read = (path: string): Buffer => {
  if (!(path in files)) throw Object.assign(new Error('absent'), { code: 'ENOENT' });
  return Buffer.from(files[path]);
};
const base: DatabaseOptions = { url: 'postgres://agentrun:agentrun@db.internal:5432/agentrun', poolSize: 5, applicationName: 'test' };

describe('the Postgres connection options', () => {
  it('are plaintext unless a mode asks for TLS', () => {
    expect(pgConnection(base, read)).toEqual({ connectionString: base.url, ssl: false, statementTimeoutMs: undefined });
  });

  it('encrypt without checking the certificate for require', () => {
    expect(pgConnection({ ...base, sslMode: 'require' }, read).ssl).toEqual({ rejectUnauthorized: false });
  });

  it('check the CA but not the host name for verify-ca', () => {
    const ssl = pgConnection({ ...base, sslMode: 'verify-ca', sslCaFile: '/certs/ca.pem' }, read).ssl;
    expect(ssl).toMatchObject({ rejectUnauthorized: true, ca: Buffer.from('CA') });
    expect(ssl && ssl.checkServerIdentity?.()).toBeUndefined();
    expect(ssl && typeof ssl.checkServerIdentity).toBe('function');
  });

  it('check both for verify-full, with a client certificate', () => {
    const ssl = pgConnection({ ...base, sslMode: 'verify-full', sslCaFile: '/certs/ca.pem', sslCertFile: '/certs/client.pem', sslKeyFile: '/certs/client.key' }, read).ssl;
    expect(ssl).toEqual({ rejectUnauthorized: true, ca: Buffer.from('CA'), cert: Buffer.from('CRT'), key: Buffer.from('KEY') });
  });

  it("take the URL's sslmode and files as defaults and strip them, so node-postgres cannot override the mode", () => {
    const c = pgConnection({ ...base, url: `${base.url}?sslmode=verify-ca&sslrootcert=/certs/ca.pem&connect_timeout=5` }, read);
    expect(c.connectionString).toBe(`${base.url}?connect_timeout=5`);
    expect(c.ssl).toMatchObject({ rejectUnauthorized: true, ca: Buffer.from('CA') });
    expect(pgConnection({ ...base, url: `${base.url}?sslmode=verify-full`, sslMode: 'disable' }, read).ssl).toBe(false);
  });

  it("put DATABASE_PASSWORD in place of the URL's, encoded", () => {
    const c = pgConnection({ ...base, password: 'p@ss/w%rd:1' }, read);
    expect(c.connectionString).toBe('postgres://agentrun:p%40ss%2Fw%25rd%3A1@db.internal:5432/agentrun');
    expect(decodeURIComponent(new URL(c.connectionString).password)).toBe('p@ss/w%rd:1');
  });

  it('give the LISTEN connection the same TLS and statement timeout as the pool', () => {
    const options = { ...base, sslMode: 'verify-full' as const, sslCaFile: '/certs/ca.pem', statementTimeoutMs: 30_000, applicationName: 'listen' };
    expect(pgClientConfig(options, read)).toEqual({
      connectionString: base.url,
      ssl: { rejectUnauthorized: true, ca: Buffer.from('CA') },
      statement_timeout: 30_000,
      application_name: 'listen',
    });
  });

  it('refuse modes it cannot honour, half a client pair, files without TLS and unreadable files, naming the setting', () => {
    expect(() => pgConnection({ ...base, url: `${base.url}?sslmode=prefer` }, read)).toThrow('DATABASE_URL: sslmode=prefer is not supported');
    expect(() => pgConnection({ ...base, sslMode: 'require', sslCertFile: '/certs/client.pem' }, read)).toThrow('DATABASE_SSL_CERT_FILE and DATABASE_SSL_KEY_FILE go together');
    expect(() => pgConnection({ ...base, sslCaFile: '/certs/ca.pem' }, read)).toThrow('DATABASE_SSLMODE is disable but DATABASE_SSL_CA_FILE is set');
    expect(() => pgConnection({ ...base, sslMode: 'verify-full', sslCaFile: '/certs/gone.pem' }, read)).toThrow('DATABASE_SSL_CA_FILE: cannot read /certs/gone.pem: ENOENT');
    expect(() => pgConnection({ ...base, url: 'not a url' }, read)).toThrow('DATABASE_URL is not a valid URL');
  });
});

describe('the schema version check', () => {
  const shipped = ['A1', 'B2', 'C3'];

  it('passes a database at this build', () => {
    expect(compareSchema(shipped, shipped)).toEqual({ pending: [], unknown: [] });
    expect(schemaVerdict(shipped, shipped)).toEqual({});
  });

  it('refuses an older schema, naming where it is and what this build needs', () => {
    expect(schemaVerdict(['A1'], shipped).error).toBe('the database schema is at A1, this build needs C3 (pending: B2, C3): run `npm run migrate`');
    expect(schemaVerdict([], shipped).error).toBe(
      'the database schema is at empty (no migrations applied), this build needs C3 (pending: A1, B2, C3): run `npm run migrate`',
    );
  });

  it('allows a newer schema with a warning (a rolling deploy)', () => {
    const verdict = schemaVerdict([...shipped, 'D4'], shipped);
    expect(verdict.error).toBeUndefined();
    expect(verdict.warning).toContain('D4');
  });

  it('refuses a schema that both lacks a migration and has an unknown one', () => {
    expect(schemaVerdict(['A1', 'X9'], shipped).error).toContain('pending: B2, C3');
  });
});
