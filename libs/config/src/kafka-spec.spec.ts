import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig, type Env } from './env';
import { kafkaSpec } from './platform';

const problemsOf = (env: Env): string[] => {
  try {
    loadConfig(kafkaSpec, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
};

describe('the Kafka settings', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kafka-spec-'));
  const ca = join(dir, 'ca.pem');
  const cert = join(dir, 'client.pem');
  const key = join(dir, 'client.key');
  const passwordFile = join(dir, 'password');
  for (const file of [ca, cert, key]) writeFileSync(file, 'PEM');
  writeFileSync(passwordFile, 'from-a-file\n');

  it('default to a plaintext local broker, the default ids, and production topic specs', () => {
    expect(loadConfig(kafkaSpec, {})).toEqual({
      KAFKA_BROKERS: ['127.0.0.1:9092'],
      KAFKA_CLIENT_ID: undefined,
      KAFKA_GROUP_ID: undefined,
      AGENTRUN_TOPIC_PREFIX: '',
      KAFKA_SECURITY_PROTOCOL: 'PLAINTEXT',
      KAFKA_SASL_MECHANISM: undefined,
      KAFKA_SASL_USERNAME: undefined,
      KAFKA_SASL_PASSWORD: undefined,
      KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL: undefined,
      KAFKA_SASL_OAUTHBEARER_CLIENT_ID: undefined,
      KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET: undefined,
      KAFKA_SASL_OAUTHBEARER_SCOPE: undefined,
      KAFKA_SSL_CA_FILE: undefined,
      KAFKA_SSL_CERT_FILE: undefined,
      KAFKA_SSL_KEY_FILE: undefined,
      KAFKA_SSL_KEY_PASSWORD: undefined,
      KAFKA_TOPIC_PARTITIONS: 12,
      KAFKA_REPLICATION_FACTOR: 3,
      KAFKA_COMPRESSION: 'none',
      KAFKA_MAX_DECOMPRESSED_BATCH_BYTES: 64 * 1024 * 1024,
      KAFKA_MIN_INSYNC_REPLICAS: 2,
      KAFKA_RETENTION_MS: 604_800_000,
      KAFKA_TOPICS_CHECK: true,
    });
  });

  it('accept SCRAM over TLS with mTLS files and the password from a file', () => {
    const config = loadConfig(kafkaSpec, {
      KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
      KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
      KAFKA_SASL_USERNAME: 'agentrun',
      KAFKA_SASL_PASSWORD_FILE: passwordFile,
      KAFKA_SSL_CA_FILE: ca,
      KAFKA_SSL_CERT_FILE: cert,
      KAFKA_SSL_KEY_FILE: key,
      KAFKA_CLIENT_ID: 'orders-orchestrator',
      KAFKA_GROUP_ID: 'orders-commands',
    });
    expect(config).toMatchObject({ KAFKA_SASL_PASSWORD: 'from-a-file', KAFKA_SSL_CA_FILE: ca, KAFKA_CLIENT_ID: 'orders-orchestrator', KAFKA_GROUP_ID: 'orders-commands' });
  });

  it('accept OAUTHBEARER with a client secret from a file', () => {
    const config = loadConfig(kafkaSpec, {
      KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
      KAFKA_SASL_MECHANISM: 'OAUTHBEARER',
      KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL: 'https://idp.example/oauth2/token',
      KAFKA_SASL_OAUTHBEARER_CLIENT_ID: 'agentrun',
      KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET_FILE: passwordFile,
      KAFKA_SASL_OAUTHBEARER_SCOPE: 'kafka',
    });
    expect(config.KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET).toBe('from-a-file');
  });

  it('take the codec of what the service produces and the bound on a batch', () => {
    expect(loadConfig(kafkaSpec, { KAFKA_COMPRESSION: 'zstd', KAFKA_MAX_DECOMPRESSED_BATCH_BYTES: '16777216' })).toMatchObject({ KAFKA_COMPRESSION: 'zstd', KAFKA_MAX_DECOMPRESSED_BATCH_BYTES: 16_777_216 });
  });

  it.each<[string, Env, string[]]>([
    ['a SASL protocol without a mechanism', { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL' }, ['KAFKA_SASL_MECHANISM is required when KAFKA_SECURITY_PROTOCOL is SASL_SSL (one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)']],
    ['a mechanism without SASL', { KAFKA_SASL_MECHANISM: 'PLAIN' }, ['KAFKA_SASL_MECHANISM is set but KAFKA_SECURITY_PROTOCOL is PLAINTEXT; use SASL_SSL or SASL_PLAINTEXT']],
    ['an unknown mechanism (and nothing about the settings that hang on it)', { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'GSSAPI', KAFKA_SASL_USERNAME: 'u' }, ["KAFKA_SASL_MECHANISM must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, got 'GSSAPI'"]],
    ['an unknown protocol', { KAFKA_SECURITY_PROTOCOL: 'TLS' }, ["KAFKA_SECURITY_PROTOCOL must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, got 'TLS'"]],
    ['an unknown codec', { KAFKA_COMPRESSION: 'brotli' }, ["KAFKA_COMPRESSION must be one of none, gzip, snappy, lz4, zstd, got 'brotli'"]],
    ['a batch bound under 8 MiB', { KAFKA_MAX_DECOMPRESSED_BATCH_BYTES: '1048576' }, [expect.stringMatching(/^KAFKA_MAX_DECOMPRESSED_BATCH_BYTES must be .*8388608/) as unknown as string]],
    [
      'SCRAM without credentials',
      { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'SCRAM-SHA-256' },
      ['KAFKA_SASL_USERNAME is required when KAFKA_SASL_MECHANISM is SCRAM-SHA-256', 'KAFKA_SASL_PASSWORD is required when KAFKA_SASL_MECHANISM is SCRAM-SHA-256'],
    ],
    ['a password and a password file', { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'PLAIN', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p', KAFKA_SASL_PASSWORD_FILE: passwordFile }, ['KAFKA_SASL_PASSWORD and KAFKA_SASL_PASSWORD_FILE are both set; set one']],
    ['a username without SASL', { KAFKA_SASL_USERNAME: 'u' }, ['KAFKA_SASL_USERNAME is set but KAFKA_SECURITY_PROTOCOL is PLAINTEXT, which has no SASL']],
    [
      'OAUTHBEARER without its client',
      { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'OAUTHBEARER', KAFKA_SASL_USERNAME: 'u' },
      [
        'KAFKA_SASL_USERNAME is set but KAFKA_SASL_MECHANISM is OAUTHBEARER',
        'KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL is required when KAFKA_SASL_MECHANISM is OAUTHBEARER',
        'KAFKA_SASL_OAUTHBEARER_CLIENT_ID is required when KAFKA_SASL_MECHANISM is OAUTHBEARER',
        'KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET is required when KAFKA_SASL_MECHANISM is OAUTHBEARER',
      ],
    ],
    [
      'a token endpoint that is not a URL',
      { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'OAUTHBEARER', KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL: 'idp/token', KAFKA_SASL_OAUTHBEARER_CLIENT_ID: 'a', KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET: 'b' },
      ["KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL must be an http(s) URL, got 'idp/token'"],
    ],
    ['a scope without OAUTHBEARER', { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'PLAIN', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p', KAFKA_SASL_OAUTHBEARER_SCOPE: 's' }, ['KAFKA_SASL_OAUTHBEARER_SCOPE is set but KAFKA_SASL_MECHANISM is PLAIN']],
    ['a CA file without TLS', { KAFKA_SSL_CA_FILE: ca }, ['KAFKA_SSL_CA_FILE is set but KAFKA_SECURITY_PROTOCOL is PLAINTEXT, which has no TLS; use SSL or SASL_SSL']],
    ['a CA file that cannot be read', { KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_SSL_CA_FILE: join(dir, 'missing.pem') }, [`KAFKA_SSL_CA_FILE: cannot read ${join(dir, 'missing.pem')}: ENOENT`]],
    ['a certificate without its key', { KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_SSL_CERT_FILE: cert }, ['KAFKA_SSL_CERT_FILE is set but KAFKA_SSL_KEY_FILE is not']],
    ['a key without its certificate', { KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_SSL_KEY_FILE: key }, ['KAFKA_SSL_KEY_FILE is set but KAFKA_SSL_CERT_FILE is not']],
    ['a key password without a key', { KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_SSL_KEY_PASSWORD: 'pw' }, ['KAFKA_SSL_KEY_PASSWORD is set but KAFKA_SSL_KEY_FILE is not']],
    ['more in-sync replicas than replicas', { KAFKA_REPLICATION_FACTOR: '1' }, ['KAFKA_MIN_INSYNC_REPLICAS (2) must not exceed KAFKA_REPLICATION_FACTOR (1)']],
    ['no partitions', { KAFKA_TOPIC_PARTITIONS: '0' }, ['KAFKA_TOPIC_PARTITIONS must be between 1 and 10000, got 0']],
  ])('report %s at load, naming the setting', (_, env, problems) => {
    expect(problemsOf(env)).toEqual(problems);
  });

  it('take the local stack one-broker profile', () => {
    const config = loadConfig(kafkaSpec, { KAFKA_TOPIC_PARTITIONS: '3', KAFKA_REPLICATION_FACTOR: '1', KAFKA_MIN_INSYNC_REPLICAS: '1', KAFKA_TOPICS_CHECK: 'false' });
    expect(config).toMatchObject({ KAFKA_TOPIC_PARTITIONS: 3, KAFKA_REPLICATION_FACTOR: 1, KAFKA_MIN_INSYNC_REPLICAS: 1, KAFKA_TOPICS_CHECK: false });
  });
});
