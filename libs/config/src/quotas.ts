import type { Setting } from './env';

/**
 * What one org may hold at once. Every service that enforces a limit reads the same setting,
 * `AGENTRUN_QUOTAS`, so the gateway and the orchestrator admit runs alike and the snapshotter stops
 * captures at the same caps the starters planned with.
 */
export interface OrgQuota {
  /** Runs of the org not yet terminal (agent runs, evals, an eval's agent cases), checked when a run starts. */
  active_runs: number;
  /** SSE streams the org may hold open on one gateway. */
  sse_streams: number;
  /** The highest `max_steps` an agent run (or an eval's agent solver) may ask for. */
  max_steps: number;
  /** Snapshots a run may store: a higher `max_snapshots` is refused at start, captures past it are skipped. */
  snapshots_per_run: number;
  /** Archive bytes a run's snapshots may add up to before further interior captures are skipped. */
  snapshot_bytes_per_run: number;
}

export const QUOTA_KEYS = ['active_runs', 'sse_streams', 'max_steps', 'snapshots_per_run', 'snapshot_bytes_per_run'] as const satisfies readonly (keyof OrgQuota)[];

/** Applied to any org the setting does not name, and to any key an org's entry leaves out. */
export const DEFAULT_QUOTA: Readonly<OrgQuota> = Object.freeze({
  active_runs: 100,
  sse_streams: 20,
  max_steps: 1_000,
  snapshots_per_run: 200,
  snapshot_bytes_per_run: 2 * 1024 ** 3,
});

/** Each org's limits, the default's for an org not named. */
export interface Quotas {
  readonly default: Readonly<OrgQuota>;
  readonly orgs: Readonly<Record<string, Readonly<OrgQuota>>>;
}

/** The limits of one org; `org` is matched in its normalised spelling. */
export function quotaFor(quotas: Quotas, org: string): Readonly<OrgQuota> {
  return Object.hasOwn(quotas.orgs, normalisedOrg(org)) ? quotas.orgs[normalisedOrg(org)] : quotas.default;
}

// The contracts' normaliseOrg (ASCII letters lowercased) and ORG_PATTERN, restated: this lib imports nothing of ours.
const ORG_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
function normalisedOrg(org: string): string {
  return org.replace(/[A-Z]+/g, (s) => s.toLowerCase());
}

function limits(where: string, value: unknown, base: Readonly<OrgQuota>): OrgQuota {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${where} must be an object of limits (${QUOTA_KEYS.join(', ')})`);
  const out: OrgQuota = { ...base };
  for (const [key, n] of Object.entries(value as Record<string, unknown>)) {
    if (!(QUOTA_KEYS as readonly string[]).includes(key)) throw new Error(`${where}.${key} is not a quota; the quotas are ${QUOTA_KEYS.join(', ')}`);
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) throw new Error(`${where}.${key} must be a positive integer, got ${JSON.stringify(n)}`);
    out[key as keyof OrgQuota] = n;
  }
  return Object.freeze(out);
}

/**
 * Reads `{"default": {...}, "orgs": {"<org>": {...}}}`. Every key is optional: an org's entry fills what
 * it leaves out from `default`, and `default` from DEFAULT_QUOTA. Anything else (not JSON, an unknown
 * key, a limit that is not a positive integer, an org named twice in two spellings) stops the service
 * at start with the setting's name.
 */
export function parseQuotas(text: string | undefined, key = 'AGENTRUN_QUOTAS'): Quotas {
  if (text === undefined || text.trim() === '') return { default: DEFAULT_QUOTA, orgs: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new Error(`${key} is not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`${key} must be a JSON object {"default": {...}, "orgs": {"<org>": {...}}}`);
  const top = parsed as Record<string, unknown>;
  const unknown = Object.keys(top).filter((k) => k !== 'default' && k !== 'orgs');
  if (unknown.length) throw new Error(`${key} takes "default" and "orgs", not ${unknown.map((k) => JSON.stringify(k)).join(', ')}`);
  const base = top.default === undefined ? DEFAULT_QUOTA : limits(`${key}.default`, top.default, DEFAULT_QUOTA);
  const orgs: Record<string, OrgQuota> = {};
  if (top.orgs !== undefined) {
    if (typeof top.orgs !== 'object' || top.orgs === null || Array.isArray(top.orgs)) throw new Error(`${key}.orgs must be an object of limits by org`);
    for (const [org, value] of Object.entries(top.orgs as Record<string, unknown>)) {
      if (!ORG_RE.test(org)) throw new Error(`${key}.orgs: '${org}' is not an org id`);
      const name = normalisedOrg(org);
      if (Object.hasOwn(orgs, name)) throw new Error(`${key}.orgs names '${name}' twice (orgs are case-insensitive)`);
      orgs[name] = limits(`${key}.orgs.${org}`, value, base);
    }
  }
  return Object.freeze({ default: base, orgs: Object.freeze(orgs) });
}

/** The setting group of every service that enforces a quota (gateway, orchestrator, snapshotter). */
export const quotasSpec = {
  AGENTRUN_QUOTAS: { read: (env, key) => parseQuotas(env[key], key) } satisfies Setting<Quotas>,
};
