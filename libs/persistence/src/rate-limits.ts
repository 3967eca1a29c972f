import type { DataSource } from 'typeorm';

/** A bucket's limits per minute (either or both). */
export interface RateLimitPerMinute {
  requests_per_minute?: number;
  tokens_per_minute?: number;
}

/** One call asking for its turn. */
export interface RateRequest {
  /** The (model endpoint, key, model) whose limits every worker shares. */
  bucket: string;
  /** Whose turn it is: an org's tier of work (`<org>/<tier>`). */
  share: string;
  /** The share's weight (its tier's) against the other shares waiting on the bucket. */
  weight: number;
  /** The call's worst case in tokens (prompt and completion); given back in part once it is known. */
  tokens: number;
  limit: RateLimitPerMinute;
}

export type RateDecision = { ok: true } | { ok: false; wait_ms: number };

/** A share's levels, and when they were last refilled (ms since the epoch, the database's clock). */
export interface ShareLevels {
  requests: number;
  tokens: number;
  at: number;
}

/** Shares seen within this long take part in the fair split of a bucket's rate. */
export const ACTIVE_MS = 15_000;
/** A share may save up this much of its rate, so a burst after a quiet spell goes at once. */
export const BURST_MS = 10_000;
/** The longest a call is told to wait before it asks again (the split may have changed by then). */
export const MAX_WAIT_MS = 5_000;
/** A 429 halves the bucket's rate; it grows back to the whole over this long. */
export const RECOVER_MS = 60_000;
/** The rate a run of 429s cannot push a bucket under, as a share of its limits. */
export const MIN_SCALE = 0.1;
/** 429s within this long of the last one that lowered the rate do not lower it again. */
export const SHRINK_EVERY_MS = 1_000;

/** The bucket's rate now, as a share of its limits: `scale` as a 429 left it, grown back linearly since. */
export function scaleAt(scale: number, shrunkAt: number | null, now: number): number {
  if (shrunkAt === null || scale >= 1) return 1;
  return Math.min(1, scale + (1 - scale) * Math.max(0, now - shrunkAt) / RECOVER_MS);
}

/** What a level may save up: `BURST_MS` of its part of a per-minute rate. */
export function burstOf(perMinute: number, part: number): number {
  return (perMinute / 60_000) * part * BURST_MS;
}

/** One level a call must find room in: its levels (undefined when new) and the part of the bucket's rate that refills them. */
export interface Level {
  levels: ShareLevels | undefined;
  part: number;
}

/**
 * One decision of a hierarchical token bucket, as a pure function. Each level is refilled at its part of
 * the rate since it was last, up to `BURST_MS` of it or twice the call, whichever is more (a level seen
 * for the first time starts with that burst). The call goes when every level holds what it needs (one
 * request, its worst-case tokens), and takes it from each; otherwise it is told how long until it would,
 * at most `MAX_WAIT_MS` (it asks again then: the split may have changed).
 *
 * The rate limiter asks two levels: the share's (its weighted part, so shares split the rate fairly) and
 * the bucket's own (the whole rate), so the total never passes the rate, however shares come and go: a
 * share that stopped asking saves up its part while away, and the bucket's level keeps what it saved
 * from being spent on top of what the others were given meanwhile.
 */
export function decide(levels: Level[], request: Pick<RateRequest, 'tokens' | 'limit'>, now: number): { levels: ShareLevels[]; decision: RateDecision } {
  const dims = [
    { key: 'requests' as const, perMinute: request.limit.requests_per_minute, need: 1 },
    { key: 'tokens' as const, perMinute: request.limit.tokens_per_minute, need: request.tokens },
  ];
  let wait = 0;
  const next = levels.map(({ levels: was, part }) => {
    const level: ShareLevels = { requests: 0, tokens: 0, at: now };
    for (const { key, perMinute, need } of dims) {
      if (perMinute === undefined) continue;
      const perMs = (perMinute / 60_000) * part;
      const burst = burstOf(perMinute, part);
      // Room for twice the call, so what accrues between the moment it would fit and the moment it asks
      // again is kept, not cut off; a refund above the cap stays too (refill stops there, nothing is lost).
      const cap = Math.max(burst, 2 * need);
      level[key] = !was ? burst : was[key] >= cap ? was[key] : Math.min(cap, was[key] + perMs * Math.max(0, now - was.at));
      if (level[key] < need) wait = Math.max(wait, (need - level[key]) / perMs);
    }
    return level;
  });
  if (wait > 0) return { levels: next, decision: { ok: false, wait_ms: Math.min(MAX_WAIT_MS, Math.ceil(wait)) } };
  for (const level of next) for (const { key, perMinute, need } of dims) if (perMinute !== undefined) level[key] -= need;
  return { levels: next, decision: { ok: true } };
}

type BucketRow = { scale: number; shrunk_ms: number | null; now_ms: number; requests: number | null; tokens: number | null; refilled_ms: number | null };
type ShareRow = { share: string; weight: number; requests: number; tokens: number; refilled_ms: number; seen_ms: number };

const NOW_MS = `(extract(epoch FROM clock_timestamp()) * 1000)::float8`;

/**
 * Shared rate limits in Postgres: every worker process asks here before a model call, one bucket at a
 * time (a transaction-scoped advisory lock), so the limits hold across processes and hosts, and the
 * database's clock is the only one. A bucket's rate is split among the shares that asked within
 * `ACTIVE_MS` by weight, so two orgs of one tier get half each and a tier of weight 4 four times a
 * tier of weight 1; the bucket keeps a level of its own at the whole rate, so together they never get
 * more than the rate. A 429 from the provider lowers the bucket's rate for everyone (`shrink`).
 */
export class RateLimiter {
  constructor(private readonly db: DataSource) {}

  async acquire(request: RateRequest): Promise<RateDecision> {
    return this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('agentrun rate ' || $1))`, [request.bucket]);
      const [bucket]: BucketRow[] = await tx.query(
        `INSERT INTO rate_limit_buckets (bucket) VALUES ($1)
         ON CONFLICT (bucket) DO UPDATE SET bucket = EXCLUDED.bucket
         RETURNING scale, (extract(epoch FROM shrunk_at) * 1000)::float8 AS shrunk_ms, ${NOW_MS} AS now_ms,
           requests, tokens, (extract(epoch FROM refilled_at) * 1000)::float8 AS refilled_ms`,
        [request.bucket],
      );
      const now = bucket.now_ms;
      const rows: ShareRow[] = await tx.query(
        `SELECT share, weight, requests, tokens, (extract(epoch FROM refilled_at) * 1000)::float8 AS refilled_ms, (extract(epoch FROM seen_at) * 1000)::float8 AS seen_ms
           FROM rate_limit_shares WHERE bucket = $1 AND (share = $2 OR seen_at > clock_timestamp() - make_interval(secs => $3))`,
        [request.bucket, request.share, ACTIVE_MS / 1000],
      );
      // Now and then, shares not seen for a day are dropped (they would start with a full burst anyway).
      if (Math.random() < 0.01) await tx.query(`DELETE FROM rate_limit_shares WHERE bucket = $1 AND seen_at < clock_timestamp() - interval '1 day'`, [request.bucket]);
      const mine = rows.find((r) => r.share === request.share);
      const others = rows.filter((r) => r.share !== request.share).reduce((n, r) => n + r.weight, 0);
      const scale = scaleAt(bucket.scale, bucket.shrunk_ms, now);
      const {
        levels: [levels, whole],
        decision,
      } = decide(
        [
          { levels: mine && { requests: mine.requests, tokens: mine.tokens, at: mine.refilled_ms }, part: (request.weight / (request.weight + others)) * scale },
          { levels: bucket.refilled_ms === null ? undefined : { requests: bucket.requests ?? 0, tokens: bucket.tokens ?? 0, at: bucket.refilled_ms }, part: scale },
        ],
        request,
        now,
      );
      // The share's levels and the bucket's, written in one statement.
      await tx.query(
        `WITH whole AS (UPDATE rate_limit_buckets SET requests = $7, tokens = $8, refilled_at = to_timestamp($6 / 1000.0) WHERE bucket = $1)
         INSERT INTO rate_limit_shares (bucket, share, weight, requests, tokens, refilled_at, seen_at)
         VALUES ($1, $2, $3, $4, $5, to_timestamp($6 / 1000.0), to_timestamp($6 / 1000.0))
         ON CONFLICT (bucket, share) DO UPDATE SET weight = EXCLUDED.weight, requests = EXCLUDED.requests, tokens = EXCLUDED.tokens,
           refilled_at = EXCLUDED.refilled_at, seen_at = EXCLUDED.seen_at`,
        [request.bucket, request.share, request.weight, levels.requests, levels.tokens, now, whole.requests, whole.tokens],
      );
      return decision;
    });
  }

  /**
   * Gives a share, and the bucket, back the tokens its call took and did not use (its worst case less its
   * usage, or all of it when the request failed). Under the bucket's lock, as `acquire` writes the levels
   * it read.
   */
  async refund(bucket: string, share: string, tokens: number, limit: RateLimitPerMinute = {}): Promise<void> {
    if (!(tokens > 0)) return;
    // The bucket's level is not refunded past its burst (`BURST_MS` of the whole rate): calls in flight
    // while it refilled would otherwise hand back more than the rate gives, all at once.
    const cap = limit.tokens_per_minute === undefined ? null : burstOf(limit.tokens_per_minute, 1);
    await this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('agentrun rate ' || $1))`, [bucket]);
      await tx.query(
        `WITH whole AS (
           UPDATE rate_limit_buckets SET tokens = CASE WHEN $4::float8 IS NULL THEN tokens + $3 ELSE GREATEST(tokens, LEAST(tokens + $3, $4::float8)) END
            WHERE bucket = $1 AND tokens IS NOT NULL)
         UPDATE rate_limit_shares SET tokens = tokens + $3 WHERE bucket = $1 AND share = $2`,
        [bucket, share, tokens, cap],
      );
    });
  }

  /** The provider answered 429: the bucket's rate is halved (not under `MIN_SCALE`), growing back over `RECOVER_MS`. Returns the new scale. */
  async shrink(bucket: string): Promise<number> {
    return this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('agentrun rate ' || $1))`, [bucket]);
      const [row]: { scale: number; shrunk_ms: number | null; now_ms: number }[] = await tx.query(
        `SELECT scale, (extract(epoch FROM shrunk_at) * 1000)::float8 AS shrunk_ms, ${NOW_MS} AS now_ms FROM rate_limit_buckets WHERE bucket = $1`,
        [bucket],
      );
      const now = row?.now_ms ?? Date.now();
      // 429s that arrive together (the calls in flight when the provider's limit was hit) lower it once.
      if (row?.shrunk_ms != null && now - row.shrunk_ms < SHRINK_EVERY_MS) return scaleAt(row.scale, row.shrunk_ms, now);
      const scale = Math.max(MIN_SCALE, scaleAt(row?.scale ?? 1, row?.shrunk_ms ?? null, now) / 2);
      await tx.query(
        `INSERT INTO rate_limit_buckets (bucket, scale, shrunk_at) VALUES ($1, $2, to_timestamp($3 / 1000.0))
         ON CONFLICT (bucket) DO UPDATE SET scale = EXCLUDED.scale, shrunk_at = EXCLUDED.shrunk_at`,
        [bucket, scale, now],
      );
      return scale;
    });
  }
}
