import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';

/**
 * How the services authenticate to Kafka, in the setting names the platform's config uses. The config
 * lib has already checked that these are consistent; this turns them into client options.
 */
export interface KafkaSecuritySettings {
  KAFKA_SECURITY_PROTOCOL: 'PLAINTEXT' | 'SSL' | 'SASL_PLAINTEXT' | 'SASL_SSL';
  KAFKA_SASL_MECHANISM?: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512' | 'OAUTHBEARER';
  KAFKA_SASL_USERNAME?: string;
  KAFKA_SASL_PASSWORD?: string;
  KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL?: string;
  KAFKA_SASL_OAUTHBEARER_CLIENT_ID?: string;
  KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET?: string;
  KAFKA_SASL_OAUTHBEARER_SCOPE?: string;
  KAFKA_SSL_CA_FILE?: string;
  KAFKA_SSL_CERT_FILE?: string;
  KAFKA_SSL_KEY_FILE?: string;
  KAFKA_SSL_KEY_PASSWORD?: string;
}

/** TLS for the broker connections: `true` trusts the system's CAs. */
export type KafkaTls = ConnectionOptions | boolean;

export type KafkaSasl =
  | { mechanism: 'plain'; username: string; password: string }
  | { mechanism: 'scram-sha-256'; username: string; password: string }
  | { mechanism: 'scram-sha-512'; username: string; password: string }
  | { mechanism: 'oauthbearer'; oauthBearerProvider: () => Promise<{ value: string }> };

export interface KafkaClientSecurity {
  ssl?: KafkaTls;
  sasl?: KafkaSasl;
}

/** A security setting that contradicts another, or is missing; names the setting to fix. */
export class KafkaSecurityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KafkaSecurityError';
  }
}

export interface KafkaClientSecurityDeps {
  readFile?: (path: string) => Buffer;
  fetchToken?: typeof fetch;
}

/**
 * The client options for the settings. Certificate files are read here, once, at start: a rotated
 * file is picked up by a restart, which is how the mounted secrets of a rolling deploy arrive anyway.
 */
export function kafkaClientSecurity(settings: KafkaSecuritySettings, deps: KafkaClientSecurityDeps = {}): KafkaClientSecurity {
  const readFile = deps.readFile ?? ((path: string) => readFileSync(path));
  const protocol = settings.KAFKA_SECURITY_PROTOCOL;
  const tls = protocol === 'SSL' || protocol === 'SASL_SSL';
  const sasl = protocol === 'SASL_PLAINTEXT' || protocol === 'SASL_SSL';
  const result: KafkaClientSecurity = {};

  const tlsFiles = (['KAFKA_SSL_CA_FILE', 'KAFKA_SSL_CERT_FILE', 'KAFKA_SSL_KEY_FILE', 'KAFKA_SSL_KEY_PASSWORD'] as const).filter((k) => settings[k] !== undefined);
  if (!tls && tlsFiles.length) throw new KafkaSecurityError(`${tlsFiles[0]} is set but KAFKA_SECURITY_PROTOCOL is ${protocol}, which has no TLS; use SSL or SASL_SSL`);
  if (tls) {
    const { KAFKA_SSL_CA_FILE: ca, KAFKA_SSL_CERT_FILE: cert, KAFKA_SSL_KEY_FILE: key, KAFKA_SSL_KEY_PASSWORD: keyPassword } = settings;
    if (cert && !key) throw new KafkaSecurityError('KAFKA_SSL_KEY_FILE is required when KAFKA_SSL_CERT_FILE is set');
    if (key && !cert) throw new KafkaSecurityError('KAFKA_SSL_CERT_FILE is required when KAFKA_SSL_KEY_FILE is set');
    if (keyPassword !== undefined && !key) throw new KafkaSecurityError('KAFKA_SSL_KEY_PASSWORD is set but KAFKA_SSL_KEY_FILE is not');
    const options: ConnectionOptions = {};
    if (ca) options.ca = [readFile(ca)];
    if (cert && key) {
      options.cert = readFile(cert);
      options.key = readFile(key);
      if (keyPassword !== undefined) options.passphrase = keyPassword;
    }
    result.ssl = Object.keys(options).length ? options : true;
  }

  const mechanism = settings.KAFKA_SASL_MECHANISM;
  if (!sasl) {
    if (mechanism) throw new KafkaSecurityError(`KAFKA_SASL_MECHANISM is set but KAFKA_SECURITY_PROTOCOL is ${protocol}; use SASL_SSL or SASL_PLAINTEXT`);
    return result;
  }
  if (!mechanism) throw new KafkaSecurityError(`KAFKA_SASL_MECHANISM is required when KAFKA_SECURITY_PROTOCOL is ${protocol}`);
  if (mechanism === 'OAUTHBEARER') {
    const required = ['KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL', 'KAFKA_SASL_OAUTHBEARER_CLIENT_ID', 'KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET'] as const;
    const missing = required.find((k) => !settings[k]);
    if (missing) throw new KafkaSecurityError(`${missing} is required when KAFKA_SASL_MECHANISM is OAUTHBEARER`);
    result.sasl = {
      mechanism: 'oauthbearer',
      oauthBearerProvider: oauthBearerTokenProvider({
        tokenEndpointUrl: settings.KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL!,
        clientId: settings.KAFKA_SASL_OAUTHBEARER_CLIENT_ID!,
        clientSecret: settings.KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET!,
        scope: settings.KAFKA_SASL_OAUTHBEARER_SCOPE,
        fetch: deps.fetchToken,
      }),
    };
    return result;
  }
  for (const key of ['KAFKA_SASL_USERNAME', 'KAFKA_SASL_PASSWORD'] as const) {
    if (!settings[key]) throw new KafkaSecurityError(`${key} is required when KAFKA_SASL_MECHANISM is ${mechanism}`);
  }
  const login = { username: settings.KAFKA_SASL_USERNAME!, password: settings.KAFKA_SASL_PASSWORD! };
  result.sasl =
    mechanism === 'PLAIN'
      ? { mechanism: 'plain', ...login }
      : mechanism === 'SCRAM-SHA-256'
        ? { mechanism: 'scram-sha-256', ...login }
        : { mechanism: 'scram-sha-512', ...login };
  return result;
}

export interface OAuthBearerOptions {
  tokenEndpointUrl: string;
  clientId: string;
  clientSecret: string;
  scope?: string;
  fetch?: typeof fetch;
  now?: () => number;
  timeoutMs?: number;
}

/** The token endpoint refused or failed; names the setting that points at it. */
export class OAuthTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OAuthTokenError';
  }
}

/**
 * A client-credentials token source for SASL/OAUTHBEARER, as librdkafka's `oidc` method does it: the
 * client id and secret go in HTTP Basic auth, the grant type and scope in the form body. The client
 * asks for a token on every broker connection, so one is kept until shortly before it expires, and
 * concurrent connections share one request.
 */
export function oauthBearerTokenProvider(options: OAuthBearerOptions): () => Promise<{ value: string }> {
  const doFetch = options.fetch ?? fetch;
  const now = options.now ?? Date.now;
  let cached: { value: string; refreshAt: number } | undefined;
  let inFlight: Promise<{ value: string }> | undefined;

  const request = async (): Promise<{ value: string }> => {
    const body = new URLSearchParams({ grant_type: 'client_credentials' });
    if (options.scope) body.set('scope', options.scope);
    const basic = Buffer.from(`${encodeURIComponent(options.clientId)}:${encodeURIComponent(options.clientSecret)}`).toString('base64');
    const where = `KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL (${options.tokenEndpointUrl})`;
    const startedAt = now();
    let res: Response;
    try {
      res = await doFetch(options.tokenEndpointUrl, {
        method: 'POST',
        headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: body.toString(),
        signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
      });
    } catch (err) {
      throw new OAuthTokenError(`${where} could not be reached: ${(err as Error).message}`);
    }
    const text = await res.text();
    if (!res.ok) {
      const hint = res.status === 400 || res.status === 401 ? '; check KAFKA_SASL_OAUTHBEARER_CLIENT_ID, KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET and KAFKA_SASL_OAUTHBEARER_SCOPE' : '';
      throw new OAuthTokenError(`${where} answered ${res.status}: ${text.slice(0, 200)}${hint}`);
    }
    let parsed: { access_token?: unknown; expires_in?: unknown };
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch {
      throw new OAuthTokenError(`${where} answered with something other than JSON`);
    }
    if (typeof parsed.access_token !== 'string' || parsed.access_token === '') throw new OAuthTokenError(`${where} answered without an access_token`);
    const lifetimeMs = Number(parsed.expires_in) * 1000;
    if (Number.isFinite(lifetimeMs) && lifetimeMs > 0) {
      // Renew a minute early, or at 80% of a short lifetime, so a connection never presents an expired token.
      cached = { value: parsed.access_token, refreshAt: startedAt + lifetimeMs - Math.min(60_000, lifetimeMs * 0.2) };
    }
    return { value: parsed.access_token };
  };

  return async () => {
    if (cached && now() < cached.refreshAt) return { value: cached.value };
    cached = undefined;
    inFlight ??= request().finally(() => (inFlight = undefined));
    return inFlight;
  };
}
