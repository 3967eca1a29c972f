/**
 * Temporal's environment configuration: the TEMPORAL_* variables every Temporal SDK and the CLI read,
 * over an optional TOML profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE). The SDK's loader does the
 * layering; the settings below validate what it found, so a wrong value is a config error at boot.
 */
import { loadClientConfigProfile, type ClientConfigProfile, type ConfigDataSource } from '@temporalio/envconfig';
import { accessSync, constants } from 'node:fs';
import { bool, readableFile, secret, str, type Env, type Setting } from './env';

const profiles = new WeakMap<Env, ClientConfigProfile>();

/**
 * The profile file's values only; each setting applies its own variable over it. A file that cannot
 * be loaded is reported once (by the first setting that asks), then read as empty.
 */
function profileOf(env: Env): ClientConfigProfile {
  let profile = profiles.get(env);
  if (!profile) {
    profiles.set(env, {});
    const file = env.TEMPORAL_CONFIG_FILE?.trim();
    // The SDK treats a missing file as no file; one that was named must exist.
    if (file) readableFile().read(env, 'TEMPORAL_CONFIG_FILE');
    const overrideEnvVars = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
    try {
      profile = loadClientConfigProfile({ overrideEnvVars, disableEnv: true });
    } catch (err) {
      throw new Error(`TEMPORAL_CONFIG_FILE/TEMPORAL_PROFILE: ${(err as Error).message}`);
    }
    profiles.set(env, profile);
  }
  return profile;
}

function set(env: Env, key: string): boolean {
  return (env[key] ?? '').trim() !== '';
}

/** A setting whose variable wins over the profile's value, which wins over the fallback. */
function layered<T>(own: Setting<T>, fromProfile: (p: ClientConfigProfile) => T | undefined, fallback?: T): Setting<T> {
  return {
    read(env, key) {
      if (set(env, key) || set(env, `${key}_FILE`)) return own.read(env, key);
      const profile = profileOf(env);
      let value: T | undefined;
      try {
        value = fromProfile(profile);
      } catch (err) {
        throw new Error(`${key} (from the Temporal profile): ${(err as Error).message}`);
      }
      return value !== undefined ? value : fallback !== undefined ? fallback : own.read(env, key);
    },
  };
}

/** A certificate or key named by a variable or by the profile's `*_path`; inline `*_data` is refused. */
function profilePath(field: 'serverCACert' | 'clientCert' | 'clientKey'): (p: ClientConfigProfile) => string | undefined {
  return (p) => {
    const source: ConfigDataSource | undefined = p.tls?.[field];
    if (source === undefined) return undefined;
    if (!('path' in source)) throw new Error('inline certificate data is not supported; give a *_path instead');
    try {
      accessSync(source.path, constants.R_OK);
    } catch (err) {
      throw new Error(`cannot read ${source.path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    return source.path;
  };
}

function optionalBool(): Setting<boolean | undefined> {
  return { read: (env, key) => (set(env, key) ? bool(false).read(env, key) : undefined) };
}

export const temporalAddress = (): Setting<string> => layered(str(), (p) => p.address, '127.0.0.1:7233');
export const temporalNamespace = (): Setting<string> => layered(str(), (p) => p.namespace, 'default');
export const temporalApiKey = (): Setting<string | undefined> => layered(secret(), (p) => p.apiKey);
/** Unset: TLS is on when a certificate, a server name or an API key asks for it. */
export const temporalTls = (): Setting<boolean | undefined> =>
  layered(optionalBool(), (p) => (p.tls?.disabled === undefined ? undefined : !p.tls.disabled));
export const temporalTlsFile = (field: 'serverCACert' | 'clientCert' | 'clientKey'): Setting<string | undefined> =>
  layered(readableFile(), profilePath(field));
export const temporalServerName = (): Setting<string | undefined> =>
  layered({ read: (env, key) => env[key]?.trim() || undefined }, (p) => p.tls?.serverName);

/**
 * Neither of the SDK's connections (the client's gRPC channel and the workers' native one) can skip
 * the host name check, so asking for it is refused rather than silently ignored.
 */
export function temporalHostVerification(): Setting<boolean> {
  return {
    read(env, key) {
      if (bool(false).read(env, key))
        throw new Error(
          `${key}=true is not supported by the Temporal TypeScript SDK; set TEMPORAL_TLS_SERVER_NAME to a name in the server's certificate instead`,
        );
      return false;
    },
  };
}
