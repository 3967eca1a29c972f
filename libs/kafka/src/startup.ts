import type { KafkaSecuritySettings } from './security';
import { describeDifference, diffTopics, isBlocking, type TopicAdmin, type TopicSpec } from './topics';

/** Why a service cannot start on this Kafka: one message that names the brokers and what to fix. */
export class KafkaStartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KafkaStartupError';
    // The message is the whole story; a stack trace would only bury it in the log.
    this.stack = `${this.name}: ${message}`;
  }
}

type SecurityNames = Pick<KafkaSecuritySettings, 'KAFKA_SECURITY_PROTOCOL' | 'KAFKA_SASL_MECHANISM'>;

export interface StartupCheckOptions {
  brokers: readonly string[];
  security: SecurityNames;
  /** False (KAFKA_TOPICS_CHECK=false): only connect, do not look at the topics. */
  checkTopics: boolean;
}

/**
 * What a service does before it produces or consumes: one bounded round trip to the cluster, then the
 * topics it uses compared with their specs. Missing topics and too few partitions stop the service
 * (its consumers and the partitioner depend on them); any other difference is returned as a warning.
 */
export async function checkServiceTopics(admin: Pick<TopicAdmin, 'describeTopics'>, specs: readonly TopicSpec[], options: StartupCheckOptions): Promise<string[]> {
  const where = `Kafka at ${options.brokers.join(',')}`;
  let described;
  try {
    described = await admin.describeTopics(options.checkTopics ? specs.map((s) => s.name) : []);
  } catch (err) {
    throw new KafkaStartupError(explainKafkaFailure(err, options.brokers, options.security));
  }
  if (!options.checkTopics) return [];
  const differences = diffTopics(specs, described);
  const blocking = differences.filter(isBlocking);
  if (blocking.length) {
    const visibility = options.security.KAFKA_SASL_MECHANISM ? ' (a topic the principal may not Describe looks missing)' : '';
    throw new KafkaStartupError(
      `${where}: the topics this service uses are not as declared${visibility}: ${blocking.map(describeDifference).join('; ')}. ` +
        'Run `npm run topics -- apply` with the same KAFKA_* settings (or set KAFKA_TOPICS_CHECK=false to skip this check).',
    );
  }
  return differences.map((d) => `${where}: ${describeDifference(d)}; \`npm run topics -- apply\` fixes what it can`);
}

const UNTRUSTED_CERTIFICATE = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
]);
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT']);

interface ErrorLike {
  name?: string;
  message?: string;
  code?: string;
  type?: string;
  cause?: unknown;
  originalError?: unknown;
}

/** The error and whatever it wraps: kafkajs nests the real cause under retries and connection errors. */
function chainOf(err: unknown): ErrorLike[] {
  const chain: ErrorLike[] = [];
  let current: unknown = err;
  while (current && typeof current === 'object' && chain.length < 10 && !chain.includes(current as ErrorLike)) {
    const e = current as ErrorLike;
    chain.push(e);
    current = e.cause ?? e.originalError;
  }
  return chain;
}

/** Turns a failed connection into a sentence that names the brokers and the setting to fix. */
export function explainKafkaFailure(err: unknown, brokers: readonly string[], security: SecurityNames): string {
  const where = `Kafka at ${brokers.join(',')}`;
  const chain = chainOf(err);
  const innermost = chain[chain.length - 1] ?? { message: String(err) };
  const message = innermost.message ?? String(err);
  const find = (test: (e: ErrorLike) => boolean) => chain.find(test);
  const protocol = security.KAFKA_SECURITY_PROTOCOL;

  const token = find((e) => e.name === 'OAuthTokenError');
  if (token) return `${where}: no OAUTHBEARER token: ${token.message}`;
  const sasl = find((e) => e.name === 'KafkaJSSASLAuthenticationError');
  if (sasl) {
    const fix =
      security.KAFKA_SASL_MECHANISM === 'OAUTHBEARER'
        ? 'KAFKA_SASL_OAUTHBEARER_CLIENT_ID, KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET and KAFKA_SASL_OAUTHBEARER_SCOPE (the broker refused the token)'
        : `KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE), and KAFKA_SASL_MECHANISM (${security.KAFKA_SASL_MECHANISM ?? 'unset'}) against what the listener accepts`;
    return `${where} refused the login: ${sasl.message}. Check ${fix}.`;
  }
  const mechanism = find((e) => e.type === 'UNSUPPORTED_SASL_MECHANISM' || /does not support the requested SASL mechanism/i.test(e.message ?? ''));
  if (mechanism) return `${where} does not accept KAFKA_SASL_MECHANISM ${security.KAFKA_SASL_MECHANISM ?? '(unset)'} on this listener. Set it to a mechanism the listener enables.`;
  const authorization = find((e) => (e.type ?? '').includes('AUTHORIZATION'));
  if (authorization) {
    return `${where}: the principal is not allowed to do this (${authorization.type}): ${authorization.message}. Grant it Describe and DescribeConfigs on the platform's topics, or set KAFKA_TOPICS_CHECK=false.`;
  }
  const altName = find((e) => e.code === 'ERR_TLS_CERT_ALTNAME_INVALID');
  if (altName) return `${where}: a broker's certificate does not name the host it was reached at (${altName.message}). Use the host names the certificates carry in KAFKA_BROKERS.`;
  const untrustedCode = find((e) => e.code !== undefined && UNTRUSTED_CERTIFICATE.has(e.code))?.code;
  if (untrustedCode || find((e) => /certificate/i.test(e.message ?? ''))) {
    return `${where}: the broker's certificate is not trusted (${untrustedCode ?? message}). Set KAFKA_SSL_CA_FILE to the CA bundle that signed the brokers' certificates.`;
  }
  const key = find((e) => /bad decrypt|PEM|private key|key values mismatch/i.test(e.message ?? ''));
  if (key) return `${where}: the client certificate or key cannot be used (${key.message}). Check KAFKA_SSL_CERT_FILE, KAFKA_SSL_KEY_FILE and KAFKA_SSL_KEY_PASSWORD.`;
  const tlsMismatch = find((e) => e.code === 'EPROTO' || /wrong version number|packet length too long|unknown protocol|before secure TLS connection/i.test(e.message ?? ''));
  if (tlsMismatch) return `${where} does not answer TLS on this port (${tlsMismatch.message}). Check KAFKA_SECURITY_PROTOCOL (${protocol}) against the listener.`;
  const unreachable = find((e) => e.code !== undefined && UNREACHABLE.has(e.code));
  if (unreachable) return `${where} cannot be reached (${unreachable.code}). Check KAFKA_BROKERS and that the brokers are up.`;
  const closed = find((e) => e.name === 'KafkaJSConnectionClosedError' || e.name === 'KafkaJSRequestTimeoutError' || /closed|timed out|timeout/i.test(e.message ?? ''));
  if (closed) {
    return `${where} closed the connection or did not answer (${closed.message}). Check KAFKA_SECURITY_PROTOCOL (${protocol}) and KAFKA_SASL_MECHANISM against the listener, and KAFKA_BROKERS.`;
  }
  return `${where}: ${message}. Check KAFKA_BROKERS and KAFKA_SECURITY_PROTOCOL (${protocol}).`;
}
