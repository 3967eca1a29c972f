/**
 * The one place that reads the environment. Each app declares its settings once with these readers,
 * calls `loadConfig` at boot and gets a frozen, typed object; every problem is reported at once.
 */
import { accessSync, constants, readFileSync } from 'node:fs';

export type Env = Record<string, string | undefined>;

export interface Setting<T> {
  read(env: Env, key: string): T;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

function raw(env: Env, key: string): string | undefined {
  const value = env[key];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

export function str(fallback?: string): Setting<string> {
  return {
    read(env, key) {
      const value = raw(env, key) ?? fallback;
      if (value === undefined) throw new Error(`${key} is required`);
      return value;
    },
  };
}

export function optionalStr(): Setting<string | undefined> {
  return { read: (env, key) => raw(env, key) };
}

export function int(fallback: number, min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): Setting<number> {
  return {
    read(env, key) {
      const value = raw(env, key);
      if (value === undefined) return fallback;
      if (!/^-?\d+$/.test(value)) throw new Error(`${key} must be an integer, got '${value}'`);
      const n = Number(value);
      if (n < min || n > max) throw new Error(`${key} must be between ${min} and ${max}, got ${n}`);
      return n;
    },
  };
}

export function bool(fallback: boolean): Setting<boolean> {
  return {
    read(env, key) {
      const value = raw(env, key)?.toLowerCase();
      if (value === undefined) return fallback;
      if (['1', 'true', 'yes', 'on'].includes(value)) return true;
      if (['0', 'false', 'no', 'off'].includes(value)) return false;
      throw new Error(`${key} must be true or false, got '${value}'`);
    },
  };
}

export function oneOf<T extends string>(values: readonly T[], fallback: T): Setting<T> {
  return {
    read(env, key) {
      const value = raw(env, key) ?? fallback;
      if (!(values as readonly string[]).includes(value)) throw new Error(`${key} must be one of ${values.join(', ')}, got '${value}'`);
      return value as T;
    },
  };
}

export function list(fallback: string[]): Setting<string[]> {
  return {
    read(env, key) {
      const value = raw(env, key);
      return value === undefined ? fallback : value.split(',').map((s) => s.trim()).filter(Boolean);
    },
  };
}

/**
 * A secret: from `KEY`, or from the file named by `KEY_FILE` (how Kubernetes and Docker mount secrets),
 * never both. A file's trailing newline is dropped. `fallback` (or undefined) when neither is set.
 */
export function secret(): Setting<string | undefined>;
export function secret(fallback: string): Setting<string>;
export function secret(fallback?: string): Setting<string | undefined> {
  return {
    read(env, key) {
      const direct = raw(env, key);
      const file = raw(env, `${key}_FILE`);
      if (direct !== undefined && file !== undefined) throw new Error(`${key} and ${key}_FILE are both set; set one`);
      if (file === undefined) return direct ?? fallback;
      try {
        return readFileSync(file, 'utf8').replace(/\r?\n$/, '');
      } catch (err) {
        throw new Error(`${key}_FILE: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
    },
  };
}

/** A path to a file that must exist and be readable (certificates, keys); undefined when unset. */
export function readableFile(): Setting<string | undefined> {
  return {
    read(env, key) {
      const path = raw(env, key);
      if (path === undefined) return undefined;
      try {
        accessSync(path, constants.R_OK);
      } catch (err) {
        throw new Error(`${key}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
      return path;
    },
  };
}

export type Spec = Record<string, Setting<unknown>>;
export type ConfigOf<S extends Spec> = { readonly [K in keyof S]: S[K] extends Setting<infer T> ? T : never };

export function loadConfig<S extends Spec>(spec: S, env: Env = process.env): ConfigOf<S> {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(spec)) {
    try {
      out[key] = setting.read(env, key);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  if (problems.length) throw new ConfigError(problems);
  return Object.freeze(out) as ConfigOf<S>;
}
