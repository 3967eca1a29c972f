import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:tls';
import { KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError, KafkaJSSASLAuthenticationError } from 'kafkajs';
import { TOPICS } from '@agentrun/contracts';
import { KafkaBus } from './bus';
import { checkServiceTopics, explainKafkaFailure, KafkaStartupError } from './startup';
import { OAuthTokenError } from './security';
import { platformTopicSpecs, type DescribedTopic } from './topics';

const specs = platformTopicSpecs({ KAFKA_TOPIC_PARTITIONS: 12, KAFKA_REPLICATION_FACTOR: 3, KAFKA_MIN_INSYNC_REPLICAS: 2, KAFKA_RETENTION_MS: 604_800_000 }).filter((s) =>
  [TOPICS.runEvents, TOPICS.runState].includes(s.name as never),
);
const plaintext = { KAFKA_SECURITY_PROTOCOL: 'PLAINTEXT' } as const;
const brokers = ['kafka-0:9092', 'kafka-1:9092'];
const asDeclared = (): DescribedTopic[] => specs.map((s) => ({ name: s.name, partitions: s.partitions, replicationFactor: s.replicationFactor, configs: { ...s.configs }, overrides: {} }));
const admin = (topics: DescribedTopic[]) => ({ describeTopics: async (names: string[]) => topics.filter((t) => names.includes(t.name)) });

describe('checkServiceTopics', () => {
  it('passes quietly when the topics are as declared', async () => {
    await expect(checkServiceTopics(admin(asDeclared()), specs, { brokers, security: plaintext, checkTopics: true })).resolves.toEqual([]);
  });

  it('stops the service with one message naming the brokers, every missing or too small topic, and the command that fixes it', async () => {
    const cluster = asDeclared()
      .filter((t) => t.name !== TOPICS.runState)
      .map((t) => ({ ...t, partitions: 3 }));
    const failure = checkServiceTopics(admin(cluster), specs, { brokers, security: plaintext, checkTopics: true });
    await expect(failure).rejects.toBeInstanceOf(KafkaStartupError);
    await expect(failure).rejects.toThrow(
      `Kafka at kafka-0:9092,kafka-1:9092: the topics this service uses are not as declared: ${TOPICS.runEvents}: 3 partitions, wanted at least 12; ${TOPICS.runState}: missing. Run \`npm run topics -- apply\``,
    );
    const err = await failure.catch((e: Error) => e);
    expect(err.stack).toBe(`KafkaStartupError: ${err.message}`);
  });

  it('only warns about a replication factor or a config that differs', async () => {
    const cluster = asDeclared().map((t) => ({ ...t, replicationFactor: 1, configs: { ...t.configs!, 'min.insync.replicas': '1' } }));
    const warnings = await checkServiceTopics(admin(cluster), specs, { brokers, security: plaintext, checkTopics: true });
    expect(warnings).toHaveLength(4);
    expect(warnings[0]).toMatch(/^Kafka at kafka-0:9092,kafka-1:9092: .*replication factor 1, wanted 3/);
  });

  it('with KAFKA_TOPICS_CHECK=false only connects', async () => {
    const asked: string[][] = [];
    const warnings = await checkServiceTopics({ describeTopics: async (names) => (asked.push(names), []) }, specs, { brokers, security: plaintext, checkTopics: false });
    expect(warnings).toEqual([]);
    expect(asked).toEqual([[]]);
  });

  it('turns a failed connection into the explanation', async () => {
    const refusing = { describeTopics: () => Promise.reject(new KafkaJSNumberOfRetriesExceeded(new KafkaJSConnectionError('Connection error: connect ECONNREFUSED', { code: 'ECONNREFUSED' }), { retryCount: 3, retryTime: 1000 })) };
    await expect(checkServiceTopics(refusing, specs, { brokers, security: plaintext, checkTopics: true })).rejects.toThrow(
      'Kafka at kafka-0:9092,kafka-1:9092 cannot be reached (ECONNREFUSED). Check KAFKA_BROKERS',
    );
  });
});

describe('explainKafkaFailure', () => {
  const scram = { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512' } as const;
  it.each<[string, unknown, typeof scram | typeof plaintext, string]>([
    ['a refused password', new KafkaJSSASLAuthenticationError('SASL SCRAM SHA512 authentication failed: Authentication failed'), scram, 'refused the login: SASL SCRAM SHA512 authentication failed: Authentication failed. Check KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD'],
    [
      'a refused token',
      new KafkaJSSASLAuthenticationError('SASL OAUTHBEARER authentication failed'),
      { KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'OAUTHBEARER' } as never,
      'Check KAFKA_SASL_OAUTHBEARER_CLIENT_ID, KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET and KAFKA_SASL_OAUTHBEARER_SCOPE',
    ],
    ['a token endpoint that refuses', new OAuthTokenError('KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL (https://idp/token) answered 401'), scram, 'no OAUTHBEARER token: KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL (https://idp/token) answered 401'],
    ['an untrusted certificate', new KafkaJSNumberOfRetriesExceeded(new KafkaJSConnectionError('Connection error: self-signed certificate in certificate chain', { code: 'SELF_SIGNED_CERT_IN_CHAIN' }), { retryCount: 3, retryTime: 1 }), scram, "the broker's certificate is not trusted (SELF_SIGNED_CERT_IN_CHAIN). Set KAFKA_SSL_CA_FILE"],
    ['a certificate for another host', new KafkaJSConnectionError("Hostname/IP does not match certificate's altnames", { code: 'ERR_TLS_CERT_ALTNAME_INVALID' }), scram, 'Use the host names the certificates carry in KAFKA_BROKERS'],
    ['a missing ACL', new KafkaJSProtocolError({ message: 'Not authorized to access topics', type: 'TOPIC_AUTHORIZATION_FAILED', code: 29, retriable: false } as never), scram, 'the principal is not allowed to do this (TOPIC_AUTHORIZATION_FAILED)'],
    ['a mechanism the listener does not enable', new KafkaJSProtocolError({ message: 'The broker does not support the requested SASL mechanism', type: 'UNSUPPORTED_SASL_MECHANISM', code: 33, retriable: false } as never), scram, 'does not accept KAFKA_SASL_MECHANISM SCRAM-SHA-512 on this listener'],
    ['a TLS client on a plaintext listener', new KafkaJSConnectionError('Connection error: Client network socket disconnected before secure TLS connection was established', { code: 'ECONNRESET' }), scram, 'does not answer TLS on this port'],
    ['a plaintext client on a TLS listener', new KafkaJSNumberOfRetriesExceeded(new KafkaJSConnectionError('Connection timeout'), { retryCount: 3, retryTime: 1 }), plaintext, 'Check KAFKA_SECURITY_PROTOCOL (PLAINTEXT) and KAFKA_SASL_MECHANISM against the listener'],
  ])('names what to fix for %s', (_, err, security, expected) => {
    const message = explainKafkaFailure(err, brokers, security);
    expect(message.startsWith('Kafka at kafka-0:9092,kafka-1:9092')).toBe(true);
    expect(message).toContain(expected);
  });
});

describe('a real TLS listener the client does not trust', () => {
  let server: Server;
  let port: number;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kafka-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    server = createServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (socket) => socket.end());
    server.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('fails the startup check within seconds, naming the brokers and KAFKA_SSL_CA_FILE', async () => {
    const bus = new KafkaBus({ brokers: [`127.0.0.1:${port}`], clientId: 'startup-spec', ssl: true, timings: { sessionTimeout: 8_000, heartbeatInterval: 1_000, rebalanceTimeout: 10_000 } });
    const started = Date.now();
    const failure = await checkServiceTopics(bus, specs, { brokers: bus.brokers, security: { KAFKA_SECURITY_PROTOCOL: 'SSL' }, checkTopics: true }).catch((e: Error) => e);
    expect(failure).toBeInstanceOf(KafkaStartupError);
    expect((failure as Error).message).toMatch(new RegExp(`^Kafka at 127\\.0\\.0\\.1:${port}: the broker's certificate is not trusted \\(DEPTH_ZERO_SELF_SIGNED_CERT\\)\\. Set KAFKA_SSL_CA_FILE`));
    expect(Date.now() - started).toBeLessThan(20_000);
    await bus.close();
  }, 30_000);
});
