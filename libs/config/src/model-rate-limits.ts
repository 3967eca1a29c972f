import type { Setting } from './env';
import { jsonObjectSetting } from './model-prices';

/** A model's shared limits: requests and tokens (prompt and completion) per minute, either or both. */
export interface ModelRateLimit {
  requests_per_minute?: number;
  tokens_per_minute?: number;
}

/** Limits by model name as a run asks for it; `*` limits any model not named. */
export type ModelRateLimits = Readonly<Record<string, Readonly<ModelRateLimit>>>;

/** How much of a shared limit a tier's work gets against another's, when both wait for it. */
export type TierWeights = Readonly<Record<string, number>>;

const LIMIT_KEYS = ['requests_per_minute', 'tokens_per_minute'] as const;
const MODEL_NAME_RE = /^(\*|[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199})$/;

/**
 * Reads `AGENTRUN_MODEL_RATE_LIMITS`, `{"<model>": {"requests_per_minute": 500, "tokens_per_minute": 90000}, "*": {...}}`:
 * the limits every worker process calling that model on this endpoint with this key shares. Empty or
 * unset is no limits. Anything malformed (an unknown key, a limit that is not a whole number >= 1, an
 * entry with neither) stops the service at start with the setting's name.
 */
export function parseModelRateLimits(text: string | undefined, key = 'AGENTRUN_MODEL_RATE_LIMITS'): ModelRateLimits {
  if (text === undefined || text.trim() === '') return Object.freeze({});
  const limits: Record<string, ModelRateLimit> = {};
  for (const [model, value] of Object.entries(jsonObjectSetting(text, key, ', {"<model>": {"requests_per_minute": n, "tokens_per_minute": n}}'))) {
    const where = `${key}.${model}`;
    if (!MODEL_NAME_RE.test(model)) throw new Error(`${key}: '${model}' is not a model name (or "*")`);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${where} must be an object with ${LIMIT_KEYS.join(' and/or ')}`);
    const entry = value as Record<string, unknown>;
    const unknown = Object.keys(entry).filter((k) => !(LIMIT_KEYS as readonly string[]).includes(k));
    if (unknown.length) throw new Error(`${where} takes ${LIMIT_KEYS.join(' and ')}, not ${unknown.map((k) => JSON.stringify(k)).join(', ')}`);
    const limit: ModelRateLimit = {};
    for (const k of LIMIT_KEYS) {
      const n = entry[k];
      if (n === undefined) continue;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 1e12) throw new Error(`${where}.${k} must be a whole number >= 1, got ${JSON.stringify(n)}`);
      limit[k] = n;
    }
    if (Object.keys(limit).length === 0) throw new Error(`${where} names no limit: give ${LIMIT_KEYS.join(' and/or ')}`);
    limits[model] = Object.freeze(limit);
  }
  return Object.freeze(limits);
}

/** The limit of a model: its own entry, else `*`, else none. */
export function rateLimitOf(limits: ModelRateLimits, model: string): Readonly<ModelRateLimit> | undefined {
  return Object.hasOwn(limits, model) ? limits[model] : Object.hasOwn(limits, '*') ? limits['*'] : undefined;
}

/** Enterprise work gets four times batch work's share of a limit both wait for, team work twice. */
export const DEFAULT_TIER_WEIGHTS: TierWeights = Object.freeze({ enterprise: 4, team: 2, batch: 1 });

/**
 * Reads `AGENTRUN_TIER_WEIGHTS`, `{"enterprise": 4, "team": 2, "batch": 1}` (the default): each tier's
 * weight in the fair share of a shared rate limit. Every tier must be given, each a number > 0.
 */
export function parseTierWeights(text: string | undefined, tiers: readonly string[], key = 'AGENTRUN_TIER_WEIGHTS'): TierWeights {
  if (text === undefined || text.trim() === '') return DEFAULT_TIER_WEIGHTS;
  const entries = jsonObjectSetting(text, key, `, {${tiers.map((t) => `"${t}": n`).join(', ')}}`);
  const unknown = Object.keys(entries).filter((t) => !tiers.includes(t));
  if (unknown.length) throw new Error(`${key}: unknown tier ${unknown.map((t) => JSON.stringify(t)).join(', ')}; the tiers are ${tiers.join(', ')}`);
  const weights: Record<string, number> = {};
  for (const tier of tiers) {
    const n = entries[tier];
    if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0 || n > 1_000) throw new Error(`${key}.${tier} must be a number > 0 (at most 1000), got ${JSON.stringify(n)}`);
    weights[tier] = n;
  }
  return Object.freeze(weights);
}

/** The tiers a weight is given for: the contracts' `TIERS` (this lib does not import the contracts; a unit test holds the two equal). */
export const WEIGHTED_TIERS = ['enterprise', 'team', 'batch'] as const;

/** The setting group of the processes that make model calls (the orchestrator). */
export const modelRateLimitsSpec = {
  AGENTRUN_MODEL_RATE_LIMITS: { read: (env, key) => parseModelRateLimits(env[key], key) } satisfies Setting<ModelRateLimits>,
  AGENTRUN_TIER_WEIGHTS: { read: (env, key) => parseTierWeights(env[key], WEIGHTED_TIERS, key) } satisfies Setting<TierWeights>,
};
