import * as fc from 'fast-check';
import { ACTIVE_MS, burstOf, decide, MAX_WAIT_MS, MIN_SCALE, RECOVER_MS, scaleAt, type RateLimitPerMinute, type ShareLevels } from './rate-limits';

/** A bucket's limits: tokens, requests or both per minute. */
const limitArb: fc.Arbitrary<RateLimitPerMinute> = fc.oneof(
  fc.record({ tokens_per_minute: fc.integer({ min: 600, max: 600_000 }) }),
  fc.record({ requests_per_minute: fc.integer({ min: 6, max: 6_000 }) }),
  fc.record({ tokens_per_minute: fc.integer({ min: 600, max: 600_000 }), requests_per_minute: fc.integer({ min: 6, max: 6_000 }) }),
);
const tokensArb = fc.integer({ min: 1, max: 20_000 });
const partArb = fc.double({ min: 0.01, max: 1, noNaN: true });
const levelsArb: fc.Arbitrary<ShareLevels | undefined> = fc.option(fc.record({ requests: fc.double({ min: 0, max: 100, noNaN: true }), tokens: fc.double({ min: 0, max: 50_000, noNaN: true }), at: fc.integer({ min: 0, max: 100_000 }) }), { nil: undefined });

/** One call of a share, `dt` ms after the one before. */
const callArb = fc.record({ share: fc.nat(2), dt: fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 0, max: 2_000 }) }, { weight: 1, arbitrary: fc.integer({ min: 10_000, max: 30_000 }) }), tokens: tokensArb });

const EPS = 1e-6;

describe('the shared token bucket (properties)', () => {
  it('under any interleaving of shares coming and going, what is granted never passes the rate (plus the starting burst), and no level goes negative', () => {
    fc.assert(
      fc.property(limitArb, fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 3, maxLength: 3 }), fc.double({ min: MIN_SCALE, max: 1, noNaN: true }), fc.array(callArb, { maxLength: 150 }), (limit, weights, scale, calls) => {
        // As the limiter splits a bucket: a share's part is its weight against the shares seen within ACTIVE_MS.
        const lastAsk = [-Infinity, -Infinity, -Infinity];
        const shares: (ShareLevels | undefined)[] = [undefined, undefined, undefined];
        let bucket: ShareLevels | undefined;
        const granted = { tokens: 0, requests: 0 };
        let now = 0;
        let start: number | undefined;
        for (const { share, dt, tokens } of calls) {
          now += dt;
          start ??= now;
          const others = weights.reduce((n, w, j) => n + (j !== share && now - lastAsk[j] < ACTIVE_MS ? w : 0), 0);
          lastAsk[share] = now;
          const part = (weights[share] / (weights[share] + others)) * scale;
          const out = decide([{ levels: shares[share], part }, { levels: bucket, part: scale }], { tokens, limit }, now);
          [shares[share], bucket] = out.levels;
          if (out.decision.ok) {
            granted.tokens += tokens;
            granted.requests += 1;
          }
          for (const level of out.levels) if (level.tokens < -EPS || level.requests < -EPS) throw new Error(`a level went negative: ${JSON.stringify(level)}`);
          for (const [key, perMinute] of [['tokens', limit.tokens_per_minute], ['requests', limit.requests_per_minute]] as const) {
            // The bucket's own level starts with its burst and refills at the whole (scaled) rate.
            const allowance = perMinute === undefined ? Infinity : burstOf(perMinute, scale) + (perMinute / 60_000) * scale * (now - start);
            if (granted[key] > allowance + EPS) throw new Error(`${granted[key]} ${key} granted by ${now} ms; the rate allows ${allowance}`);
          }
        }
      }),
      { numRuns: 60 },
    );
  });

  it('a call that goes takes exactly what it needs from every level (refilled as documented); one told to wait takes nothing', () => {
    fc.assert(
      fc.property(levelsArb, levelsArb, partArb, limitArb, tokensArb, fc.integer({ min: 0, max: 200_000 }), (share, bucket, part, limit, tokens, now) => {
        const at = Math.max(now, share?.at ?? 0, bucket?.at ?? 0);
        const levels = [{ levels: share, part }, { levels: bucket, part: 1 }];
        const out = decide(levels, { tokens, limit }, at);
        const dims = [
          { key: 'tokens' as const, perMinute: limit.tokens_per_minute, need: tokens },
          { key: 'requests' as const, perMinute: limit.requests_per_minute, need: 1 },
        ];
        const fits = levels.every((l) => dims.every((d) => d.perMinute === undefined || refillOf(l.levels, l.part, d.perMinute, d.need, at, d.key) >= d.need));
        expect(out.decision.ok).toBe(fits);
        levels.forEach((l, i) => {
          for (const d of dims) {
            if (d.perMinute === undefined) continue;
            const refilled = refillOf(l.levels, l.part, d.perMinute, d.need, at, d.key);
            expect(out.levels[i][d.key]).toBeCloseTo(out.decision.ok ? refilled - d.need : refilled, 6);
          }
          expect(out.levels[i].at).toBe(at);
        });
        // A wait (there is one exactly when the call does not fit, checked above) is from 1 ms to MAX_WAIT_MS; 1 stands in for a go's.
        const wait = out.decision.ok ? 1 : out.decision.wait_ms;
        expect(wait).toBeGreaterThanOrEqual(1);
        expect(wait).toBeLessThanOrEqual(MAX_WAIT_MS);
      }),
    );
  });

  it('waiting is honest: a call told to wait less than the longest wait goes when it asks again after that wait', () => {
    fc.assert(
      fc.property(levelsArb, partArb, limitArb, tokensArb, fc.integer({ min: 0, max: 200_000 }), (share, part, limit, tokens, now) => {
        const at = Math.max(now, share?.at ?? 0);
        const first = decide([{ levels: share, part }], { tokens, limit }, at);
        fc.pre(!first.decision.ok && first.decision.wait_ms < MAX_WAIT_MS);
        const wait = first.decision.ok ? 0 : first.decision.wait_ms;
        expect(decide([{ levels: first.levels[0], part }], { tokens, limit }, at + wait).decision).toEqual({ ok: true });
      }),
    );
  });

  it('more time or a smaller call never turns a go into a wait', () => {
    fc.assert(
      fc.property(levelsArb, levelsArb, partArb, limitArb, tokensArb, fc.integer({ min: 0, max: 200_000 }), fc.integer({ min: 0, max: 100_000 }), fc.double({ min: 0, max: 1, noNaN: true }), (share, bucket, part, limit, tokens, now, later, fraction) => {
        const at = Math.max(now, share?.at ?? 0, bucket?.at ?? 0);
        const levels = [{ levels: share, part }, { levels: bucket, part: 1 }];
        fc.pre(decide(levels, { tokens, limit }, at).decision.ok);
        expect(decide(levels, { tokens, limit }, at + later).decision).toEqual({ ok: true });
        expect(decide(levels, { tokens: Math.max(1, Math.floor(tokens * fraction)), limit }, at).decision).toEqual({ ok: true });
      }),
    );
  });

  it("a 429's scale grows back monotonically, stays within [scale, 1], and is whole after RECOVER_MS", () => {
    fc.assert(
      fc.property(fc.double({ min: MIN_SCALE, max: 1, noNaN: true }), fc.integer({ min: 0, max: 1e9 }), fc.integer({ min: -1_000, max: 2 * RECOVER_MS }), fc.integer({ min: 0, max: RECOVER_MS }), (scale, shrunkAt, since, more) => {
        const now = shrunkAt + since;
        const s = scaleAt(scale, shrunkAt, now);
        expect(s).toBeGreaterThanOrEqual(scale);
        expect(s).toBeLessThanOrEqual(1);
        expect(scaleAt(scale, shrunkAt, now + more)).toBeGreaterThanOrEqual(s);
        // Whole from RECOVER_MS on (before then, bounded as above).
        expect(s).toBe(since >= RECOVER_MS ? 1 : s);
        expect(scaleAt(scale, null, now)).toBe(1);
      }),
    );
  });
});

/** A level's refill as decide documents it: its burst when new; kept when at or over its cap (a refund); else refilled up to the cap. */
function refillOf(was: ShareLevels | undefined, part: number, perMinute: number, need: number, now: number, key: 'tokens' | 'requests'): number {
  const burst = burstOf(perMinute, part);
  if (!was) return burst;
  const cap = Math.max(burst, 2 * need);
  return was[key] >= cap ? was[key] : Math.min(cap, was[key] + (perMinute / 60_000) * part * Math.max(0, now - was.at));
}
