import { BURST_MS, decide, MAX_WAIT_MS, RECOVER_MS, scaleAt, type RateRequest, type ShareLevels } from './rate-limits';

/** One level alone, as a bucket with a single share sees it. */
const one = (levels: ShareLevels | undefined, request: Pick<RateRequest, 'tokens' | 'limit'>, part: number, now: number) => {
  const out = decide([{ levels, part }], request, now);
  return { levels: out.levels[0], decision: out.decision };
};

const limit = { tokens_per_minute: 6_000, requests_per_minute: 60 };

describe('the shared token bucket (pure decisions)', () => {
  it('a share seen first starts with its burst, and a call takes what it needs from it', () => {
    const { levels, decision } = one(undefined, { tokens: 200, limit }, 1, 0);
    expect(decision).toEqual({ ok: true });
    // 100 tokens/s and 1 request/s: 10 s of each, less the call.
    expect(levels).toEqual({ requests: (60 / 60_000) * BURST_MS - 1, tokens: (6_000 / 60_000) * BURST_MS - 200, at: 0 });
  });

  it('an empty share is told how long until its call fits, at most MAX_WAIT_MS', () => {
    const empty = { requests: 5, tokens: 0, at: 0 };
    expect(one(empty, { tokens: 200, limit }, 1, 0).decision).toEqual({ ok: false, wait_ms: 2_000 });
    // Half the rate: twice as long.
    expect(one(empty, { tokens: 200, limit }, 0.5, 0).decision).toEqual({ ok: false, wait_ms: 4_000 });
    expect(one(empty, { tokens: 900, limit }, 1, 0).decision).toEqual({ ok: false, wait_ms: MAX_WAIT_MS });
    // After the wait it fits.
    expect(one(empty, { tokens: 200, limit }, 1, 2_000).decision).toEqual({ ok: true });
  });

  it('a call larger than the burst waits until its whole worst case is saved, then takes it', () => {
    const full = { requests: 10, tokens: 1_000, at: 0 };
    expect(one(full, { tokens: 3_000, limit }, 1, 0).decision).toEqual({ ok: false, wait_ms: MAX_WAIT_MS });
    // 100 tokens a second: 20 s to save the other 2,000; the level may hold twice the call meanwhile.
    const saved = one(full, { tokens: 3_000, limit }, 1, 20_000);
    expect(saved.decision).toEqual({ ok: true });
    expect(saved.levels.tokens).toBe(0);
    expect(one(full, { tokens: 3_000, limit }, 1, 100_000).levels.tokens).toBe(3_000);
  });

  it('a refund above the cap is kept; refill stops at the cap', () => {
    const over = { requests: 10, tokens: 1_500, at: 0 };
    expect(one(over, { tokens: 100, limit }, 1, 5_000).levels.tokens).toBe(1_400);
    expect(one({ requests: 10, tokens: 900, at: 0 }, { tokens: 100, limit }, 1, 5_000).levels.tokens).toBe(900);
  });

  it('requests per minute alone: one request a call, whatever its tokens', () => {
    const rpm = { requests_per_minute: 6 };
    const empty = { requests: 0, tokens: 0, at: 0 };
    expect(one(empty, { tokens: 1e6, limit: rpm }, 1, 0).decision).toEqual({ ok: false, wait_ms: MAX_WAIT_MS });
    expect(one(empty, { tokens: 1e6, limit: rpm }, 1, 10_000).decision).toEqual({ ok: true });
  });

  it("over a long run each share's calls add up to its part of the rate", () => {
    // Two shares of equal weight take turns, each calling as soon as it is allowed, for 10 minutes.
    const taken = [0, 0];
    const levels: ({ requests: number; tokens: number; at: number } | undefined)[] = [undefined, undefined];
    const nextAt = [0, 0];
    for (let now = 0; now < 600_000; now += 50) {
      for (const i of [0, 1]) {
        if (now < nextAt[i]) continue;
        const out = one(levels[i], { tokens: 150, limit: { tokens_per_minute: 6_000 } }, 0.5, now);
        levels[i] = out.levels;
        if (out.decision.ok) taken[i] += 150;
        else nextAt[i] = now + out.decision.wait_ms;
      }
    }
    // 10 minutes at half of 6,000 a minute, plus the starting burst.
    for (const t of taken) expect(Math.abs(t - 30_000 - 500) / 30_000).toBeLessThan(0.01);
  });

  it('a call goes only when both its share and the bucket have room, and takes from both', () => {
    const share = { requests: 10, tokens: 1_000, at: 0 };
    const emptyBucket = { requests: 10, tokens: 0, at: 0 };
    // The share has room, the bucket (at the whole rate, 100 tokens/s) has none: 2 s for 200 tokens.
    const refused = decide([{ levels: share, part: 0.5 }, { levels: emptyBucket, part: 1 }], { tokens: 200, limit }, 0);
    expect(refused.decision).toEqual({ ok: false, wait_ms: 2_000 });
    expect(refused.levels.map((l) => l.tokens)).toEqual([1_000, 0]);
    const taken = decide([{ levels: share, part: 0.5 }, { levels: emptyBucket, part: 1 }], { tokens: 200, limit }, 2_000);
    expect(taken.decision).toEqual({ ok: true });
    // The share's level was above its cap (a refund), so it was not refilled: 1,000 less the call.
    expect(taken.levels.map((l) => l.tokens)).toEqual([800, 0]);
  });

  it('shares that come and go never take more than the rate together', () => {
    // Large calls (1,500 tokens against 6,000 a minute), so a share may save up twice a call: 60 s of
    // its half. Share 0 calls all the time; share 1 asks for 10 s of every minute, drops out of the split
    // 15 s after, and comes back with what it saved while away. Each call asks two levels: its share's
    // and the bucket's.
    const rate = { tokens_per_minute: 6_000 };
    const shares: (ShareLevels | undefined)[] = [undefined, undefined];
    let bucket: ShareLevels | undefined;
    const nextAt = [0, 0];
    const lastAsk = [-Infinity, -Infinity];
    let taken = 0;
    for (let now = 0; now < 600_000; now += 50) {
      for (const i of [0, 1]) {
        if (now < nextAt[i] || (i === 1 && now % 60_000 >= 10_000)) continue;
        const active = [0, 1].filter((j) => j === i || now - lastAsk[j] < 15_000).length;
        lastAsk[i] = now;
        const out = decide([{ levels: shares[i], part: 1 / active }, { levels: bucket, part: 1 }], { tokens: 1_500, limit: rate }, now);
        [shares[i], bucket] = out.levels;
        if (out.decision.ok) taken += 1_500;
        else nextAt[i] = now + out.decision.wait_ms;
      }
    }
    // 10 minutes at 6,000 a minute, plus the bucket's starting burst (twice a call): no more.
    expect(taken).toBeLessThanOrEqual(60_000 + 3_000);
    // And not much less: share 0 counts share 1 in the split for 15 s after it stops asking.
    expect(taken).toBeGreaterThan(60_000 * 0.9);
  });

  it('a 429 scale grows back to the whole over RECOVER_MS', () => {
    expect(scaleAt(1, null, 0)).toBe(1);
    expect(scaleAt(0.5, 0, 0)).toBe(0.5);
    expect(scaleAt(0.5, 0, RECOVER_MS / 2)).toBe(0.75);
    expect(scaleAt(0.5, 0, RECOVER_MS * 2)).toBe(1);
  });
});
