import { ConfigError, loadConfig, type ConfigOf, type Env, type Spec } from './env';
import { eventKeyProblems } from './event-keys';

/** The gateway's cursor-signing secret when none is set: fine on a laptop, a forgery kit anywhere else. */
export const DEVELOPMENT_CURSOR_SECRET = 'local-development-cursor-secret';
/** The least length of AGENTRUN_COMMAND_KEY_SECRET production mode takes. */
export const COMMAND_KEY_SECRET_MIN_LENGTH = 32;
/** The local stack's database password, which is also the default DATABASE_URL's. */
export const DEVELOPMENT_DATABASE_PASSWORD = 'agentrun';

/**
 * What production mode refuses: secrets left at the values a developer's machine uses. Each problem
 * names the setting to change. Only the settings present in `config` are looked at, so each service
 * is held to the secrets it reads.
 */
export function productionProblems(config: Record<string, unknown>): string[] {
  if (config.AGENTRUN_MODE !== 'production') return [];
  const problems: string[] = [];
  if (config.CURSOR_SECRET === DEVELOPMENT_CURSOR_SECRET) {
    problems.push('CURSOR_SECRET is the development default; production mode needs a secret of its own (CURSOR_SECRET or CURSOR_SECRET_FILE)');
  }
  // A gateway answers only the names it is published under; in production nobody can guess them.
  if (Array.isArray(config.GATEWAY_ALLOWED_HOSTS) && config.GATEWAY_ALLOWED_HOSTS.length === 0) {
    problems.push(
      'GATEWAY_ALLOWED_HOSTS is empty; production mode needs the host names clients reach the gateway by (e.g. GATEWAY_ALLOWED_HOSTS=agentrun.example.com), since a request naming any other host is refused',
    );
  }
  // Unset is allowed (every Kafka command is then refused, said at startup); a short one is a guessable one.
  if (typeof config.AGENTRUN_COMMAND_KEY_SECRET === 'string' && config.AGENTRUN_COMMAND_KEY_SECRET.length < COMMAND_KEY_SECRET_MIN_LENGTH) {
    problems.push(
      `AGENTRUN_COMMAND_KEY_SECRET is shorter than ${COMMAND_KEY_SECRET_MIN_LENGTH} characters; command keys are derived from it, so it needs to be a long random secret (e.g. openssl rand -hex 32)`,
    );
  }
  if (typeof config.DATABASE_URL === 'string') {
    const password = typeof config.DATABASE_PASSWORD === 'string' ? config.DATABASE_PASSWORD : passwordOf(config.DATABASE_URL);
    if (password === DEVELOPMENT_DATABASE_PASSWORD) {
      problems.push('the database password is the development default; production mode needs another (DATABASE_PASSWORD, DATABASE_PASSWORD_FILE or DATABASE_URL)');
    }
  }
  return problems;
}

function passwordOf(url: string): string | undefined {
  try {
    return decodeURIComponent(new URL(url).password) || undefined;
  } catch {
    return undefined;
  }
}

/**
 * What local mode refuses: a listener (any `<APP>_HOST` setting) on an address other hosts can reach,
 * since local mode takes the org from an unauthenticated header.
 */
export function localProblems(config: Record<string, unknown>): string[] {
  if (config.AGENTRUN_MODE !== 'local') return [];
  return Object.entries(config)
    .filter(([key, value]) => key.endsWith('_HOST') && typeof value === 'string' && !isLoopback(value))
    .map(
      ([key, value]) =>
        `${key} is ${String(value)}, but AGENTRUN_MODE=local trusts the X-Org header without authentication and so listens only on loopback addresses: set ${key}=127.0.0.1, or AGENTRUN_MODE=production (API tokens)`,
    );
}

export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare) || /^::ffff:127\./.test(bare);
}

/** A service's configuration: its settings read and checked, then what its mode refuses. */
export function loadServiceConfig<S extends Spec>(spec: S, env: Env = process.env): ConfigOf<S> {
  const config = loadConfig(spec, env);
  const problems = [...productionProblems(config as Record<string, unknown>), ...localProblems(config as Record<string, unknown>), ...eventKeyProblems(config as Record<string, unknown>)];
  if (problems.length) throw new ConfigError(problems);
  return config;
}
