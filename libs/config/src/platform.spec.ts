import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from './env';
import { databaseSpec, loggingSpec, temporalSpec } from './platform';

const dir = mkdtempSync(join(tmpdir(), 'agentrun-platform-'));
const ca = join(dir, 'ca.pem');
writeFileSync(ca, 'CA');
const profileFile = join(dir, 'temporal.toml');
writeFileSync(
  profileFile,
  [
    '[profile.default]',
    'address = "file-default:7233"',
    '[profile.cloud]',
    'address = "prod.acct.tmprl.cloud:7233"',
    'namespace = "prod.acct"',
    'api_key = "from-file"',
    '[profile.cloud.tls]',
    `server_ca_cert_path = "${ca}"`,
    'server_name = "prod.acct.tmprl.cloud"',
    '[profile.inline.tls]',
    'server_ca_cert_data = "-----BEGIN CERTIFICATE-----"',
  ].join('\n'),
);

function problems(spec: Parameters<typeof loadConfig>[0], env: Record<string, string>): string[] {
  try {
    loadConfig(spec, env);
  } catch (err) {
    return (err as ConfigError).problems;
  }
  return [];
}

describe('the Temporal settings', () => {
  it('default to the local server, plaintext, with the search attribute check on', () => {
    expect(loadConfig(temporalSpec, {})).toEqual({
      TEMPORAL_ADDRESS: '127.0.0.1:7233',
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_API_KEY: undefined,
      TEMPORAL_TLS: undefined,
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: undefined,
      TEMPORAL_TLS_CLIENT_CERT_PATH: undefined,
      TEMPORAL_TLS_CLIENT_KEY_PATH: undefined,
      TEMPORAL_TLS_SERVER_NAME: undefined,
      TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: false,
      TEMPORAL_CHECK_SEARCH_ATTRIBUTES: true,
      AGENTRUN_TASK_QUEUE_PREFIX: '',
    });
  });

  it('read a TOML profile, with each variable winning over it', () => {
    const fromFile = loadConfig(temporalSpec, { TEMPORAL_CONFIG_FILE: profileFile, TEMPORAL_PROFILE: 'cloud' });
    expect(fromFile).toMatchObject({
      TEMPORAL_ADDRESS: 'prod.acct.tmprl.cloud:7233',
      TEMPORAL_NAMESPACE: 'prod.acct',
      TEMPORAL_API_KEY: 'from-file',
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca,
      TEMPORAL_TLS_SERVER_NAME: 'prod.acct.tmprl.cloud',
    });
    const overridden = loadConfig(temporalSpec, { TEMPORAL_CONFIG_FILE: profileFile, TEMPORAL_PROFILE: 'cloud', TEMPORAL_API_KEY: 'from-env', TEMPORAL_NAMESPACE: 'other.acct' });
    expect(overridden).toMatchObject({ TEMPORAL_API_KEY: 'from-env', TEMPORAL_NAMESPACE: 'other.acct', TEMPORAL_ADDRESS: 'prod.acct.tmprl.cloud:7233' });
    expect(loadConfig(temporalSpec, { TEMPORAL_CONFIG_FILE: profileFile }).TEMPORAL_ADDRESS).toBe('file-default:7233');
  });

  it('take the API key from a file and a boolean TEMPORAL_TLS', () => {
    const keyFile = join(dir, 'api-key');
    writeFileSync(keyFile, 'secret-key\n');
    expect(loadConfig(temporalSpec, { TEMPORAL_API_KEY_FILE: keyFile, TEMPORAL_TLS: 'true' })).toMatchObject({ TEMPORAL_API_KEY: 'secret-key', TEMPORAL_TLS: true });
  });

  it('refuse a missing certificate, a missing profile file or profile, inline certificate data and skipping host verification, naming each', () => {
    expect(problems(temporalSpec, { TEMPORAL_TLS_CLIENT_CERT_PATH: join(dir, 'absent.pem') })).toEqual([
      expect.stringMatching(/^TEMPORAL_TLS_CLIENT_CERT_PATH: cannot read .*absent\.pem: ENOENT$/),
    ]);
    expect(problems(temporalSpec, { TEMPORAL_CONFIG_FILE: join(dir, 'absent.toml') })).toEqual([expect.stringMatching(/^TEMPORAL_CONFIG_FILE: cannot read .*absent\.toml: ENOENT$/)]);
    expect(problems(temporalSpec, { TEMPORAL_CONFIG_FILE: profileFile, TEMPORAL_PROFILE: 'nope' })).toEqual([
      "TEMPORAL_CONFIG_FILE/TEMPORAL_PROFILE: Profile 'nope' not found in config data",
    ]);
    expect(problems(temporalSpec, { TEMPORAL_CONFIG_FILE: profileFile, TEMPORAL_PROFILE: 'inline' })).toContain(
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH (from the Temporal profile): inline certificate data is not supported; give a *_path instead',
    );
    expect(problems(temporalSpec, { TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'true' })).toEqual([
      expect.stringContaining('TEMPORAL_TLS_DISABLE_HOST_VERIFICATION=true is not supported by the Temporal TypeScript SDK'),
    ]);
    expect(problems(temporalSpec, { TEMPORAL_TLS: 'sometimes' })).toEqual(["TEMPORAL_TLS must be true or false, got 'sometimes'"]);
  });
});

describe('the database settings', () => {
  it('migrate at start in local mode and only check the schema in production, unless DATABASE_MIGRATE says otherwise', () => {
    expect(loadConfig(databaseSpec, {}).DATABASE_MIGRATE).toBe('auto');
    expect(loadConfig(databaseSpec, { AGENTRUN_MODE: 'production' }).DATABASE_MIGRATE).toBe('check');
    expect(loadConfig(databaseSpec, { AGENTRUN_MODE: 'production', DATABASE_MIGRATE: 'auto' }).DATABASE_MIGRATE).toBe('auto');
    expect(loadConfig(databaseSpec, { DATABASE_MIGRATE: 'check' }).DATABASE_MIGRATE).toBe('check');
  });

  it('default to no sslmode of their own and a 30 s statement timeout', () => {
    expect(loadConfig(databaseSpec, {})).toMatchObject({ DATABASE_SSLMODE: undefined, DATABASE_STATEMENT_TIMEOUT_MS: 30_000, DATABASE_PASSWORD: undefined });
  });

  it('refuse an unknown sslmode or migrate mode and a missing CA file', () => {
    expect(problems(databaseSpec, { DATABASE_SSLMODE: 'prefer', DATABASE_MIGRATE: 'later', DATABASE_SSL_CA_FILE: join(dir, 'absent.pem') })).toEqual([
      "DATABASE_SSLMODE must be one of disable, require, verify-ca, verify-full, got 'prefer'",
      expect.stringMatching(/^DATABASE_SSL_CA_FILE: cannot read .*absent\.pem: ENOENT$/),
      "DATABASE_MIGRATE must be one of auto, check, got 'later'",
    ]);
  });
});

describe('loggingSpec', () => {
  it('logs JSON in production mode and text in local mode unless LOG_FORMAT says otherwise', () => {
    expect(loadConfig(loggingSpec, {})).toEqual({ LOG_FORMAT: 'text', LOG_LEVEL: 'info' });
    expect(loadConfig(loggingSpec, { AGENTRUN_MODE: 'production' }).LOG_FORMAT).toBe('json');
    expect(loadConfig(loggingSpec, { AGENTRUN_MODE: 'production', LOG_FORMAT: 'text' }).LOG_FORMAT).toBe('text');
    expect(loadConfig(loggingSpec, { LOG_FORMAT: 'json', LOG_LEVEL: 'debug' })).toEqual({ LOG_FORMAT: 'json', LOG_LEVEL: 'debug' });
  });

  it('refuses an unknown format or level by name', () => {
    let problems: string[] = [];
    try {
      loadConfig(loggingSpec, { LOG_FORMAT: 'xml', LOG_LEVEL: 'loud' });
    } catch (err) {
      problems = (err as ConfigError).problems;
    }
    expect(problems).toEqual(["LOG_FORMAT must be one of json, text, got 'xml'", "LOG_LEVEL must be one of trace, debug, info, warn, error, got 'loud'"]);
  });
});
