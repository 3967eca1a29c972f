import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KafkaConfig } from 'kafkajs';
import type { ClientConfig } from 'pg';
import { REPO_ROOT } from './stack-env';

/**
 * What the stack's secure profile wrote under .stack/secure/ (deploy/local/secure.sh): the settings
 * every platform service reads (platform.env), each service's Kafka identity (env/<service>.env) and
 * the `outside` client's librdkafka properties (client.properties).
 */
export interface SecureStack {
  /** platform.env: Kafka over SASL_SSL, Temporal over mTLS, Postgres with verify-full. */
  platform: Record<string, string>;
  service(app: string): Record<string, string>;
  /** client.properties, keyed as librdkafka names them. */
  outside: Record<string, string>;
}

export const SECURE_DIR = join(REPO_ROOT, '.stack', 'secure');

/** Which profile the local stack runs in, as stack.sh recorded it; `none` when it is down. */
export function runningStackProfile(): string {
  const file = join(REPO_ROOT, '.stack', 'profile');
  return existsSync(file) ? readFileSync(file, 'utf8').trim() || 'none' : 'none';
}

function readEnvFile(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const trimmed = line.trim();
    if (!trimmed || trimmed.startsWith('#')) continue;
    const at = trimmed.indexOf('=');
    if (at > 0) out[trimmed.slice(0, at).trim()] = trimmed.slice(at + 1).trim();
  }
  return out;
}

export function secureStack(): SecureStack {
  if (!existsSync(join(SECURE_DIR, 'platform.env'))) {
    throw new Error(`${SECURE_DIR}/platform.env is missing: start the stack with AGENTRUN_STACK_PROFILE=secure bash deploy/local/stack.sh up`);
  }
  return {
    platform: readEnvFile(join(SECURE_DIR, 'platform.env')),
    service: (app) => {
      const file = join(SECURE_DIR, 'env', `${app}.env`);
      return existsSync(file) ? readEnvFile(file) : {};
    },
    outside: readEnvFile(join(SECURE_DIR, 'client.properties')),
  };
}

/** A kafkajs configuration from librdkafka properties, as an outside system holding client.properties would build it. */
export function kafkaClientOfProperties(props: Record<string, string>, clientId: string): KafkaConfig {
  if (props['sasl.mechanisms'] !== 'SCRAM-SHA-512') throw new Error(`unexpected sasl.mechanisms ${props['sasl.mechanisms']}`);
  return {
    clientId,
    brokers: props['bootstrap.servers'].split(','),
    ssl: { ca: [readFileSync(props['ssl.ca.location'], 'utf8')], rejectUnauthorized: true },
    sasl: { mechanism: 'scram-sha-512', username: props['sasl.username'], password: props['sasl.password'] },
  };
}

/** A pg client configuration for `database` with the platform's TLS settings (verify-full against the stack's CA). */
export function pgClientOf(platform: Record<string, string>, database?: string): ClientConfig {
  const url = new URL(platform.DATABASE_URL);
  // Field by field: pg lets a connection string's (absent) password win over a separate one.
  return {
    host: url.hostname,
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username),
    database: database ?? url.pathname.replace(/^\//, ''),
    password: readFileSync(platform.DATABASE_PASSWORD_FILE, 'utf8').trim(),
    ssl: { ca: readFileSync(platform.DATABASE_SSL_CA_FILE, 'utf8'), rejectUnauthorized: true },
  };
}
