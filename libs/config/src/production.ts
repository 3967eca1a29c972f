import { ConfigError, loadConfig, type ConfigOf, type Env, type Spec } from './env';

/** The gateway's cursor-signing secret when none is set: fine on a laptop, a forgery kit anywhere else. */
export const DEVELOPMENT_CURSOR_SECRET = 'local-development-cursor-secret';
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
  const problems = [...productionProblems(config as Record<string, unknown>), ...localProblems(config as Record<string, unknown>)];
  if (problems.length) throw new ConfigError(problems);
  return config;
}
