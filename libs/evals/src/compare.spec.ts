import { bootstrapInterval, compareCases, mulberry32, type CaseResult } from './compare';

const results = (scores: Record<string, number | null>): CaseResult[] => Object.entries(scores).map(([case_id, score]) => ({ case_id, score }));

describe('compareCases', () => {
  it('sorts each case id into improved, regressed, unchanged, added or removed', () => {
    const current = results({ a: 1, b: 0, c: 0.5, d: 1, e: null, f: 0.2 });
    const baseline = results({ a: 0, b: 1, c: 0.5, e: 1, f: null, g: 0 });
    const comparison = compareCases(current, baseline);
    expect(comparison.cases).toEqual([
      { case_id: 'a', change: 'improved', current: 1, baseline: 0 },
      { case_id: 'b', change: 'regressed', current: 0, baseline: 1 },
      { case_id: 'c', change: 'unchanged', current: 0.5, baseline: 0.5 },
      { case_id: 'd', change: 'added', current: 1, baseline: null },
      { case_id: 'e', change: 'unchanged', current: null, baseline: 1, note: 'ungraded' },
      { case_id: 'f', change: 'unchanged', current: 0.2, baseline: null, note: 'ungraded' },
      { case_id: 'g', change: 'removed', current: null, baseline: 0 },
    ]);
    expect(comparison.counts).toEqual({ improved: 1, regressed: 1, unchanged: 3, added: 1, removed: 1 });
    // Means over a, b, c: the cases graded in both.
    expect(comparison).toMatchObject({ paired: 3, mean_current: 0.5, mean_baseline: 0.5, mean_difference: 0 });
  });

  it('does not call float noise a change, and rounds to 4 decimals', () => {
    const comparison = compareCases(results({ a: 0.1 + 0.2, b: 2 / 3 }), results({ a: 0.3, b: 1 / 3 }));
    expect(comparison.cases).toEqual([
      { case_id: 'a', change: 'unchanged', current: 0.3, baseline: 0.3 },
      { case_id: 'b', change: 'improved', current: 0.6667, baseline: 0.3333 },
    ]);
    expect(comparison.mean_difference).toBe(0.1667);
  });

  it('has no means with nothing paired and no interval with fewer than 2 pairs', () => {
    expect(compareCases(results({ a: 1 }), results({ b: 1 }))).toMatchObject({ paired: 0, mean_current: null, mean_baseline: null, mean_difference: null, ci95: null });
    expect(compareCases(results({ a: 1, b: null }), results({ a: 0, b: 0 }))).toMatchObject({ paired: 1, mean_difference: 1, ci95: null });
  });

  it('refuses a case twice or a score out of range', () => {
    expect(() => compareCases(results({ a: 1 }).concat(results({ a: 0 })), [])).toThrow("current has case 'a' twice");
    expect(() => compareCases([], results({ a: 1.5 }))).toThrow("baseline case 'a' has score 1.5, not a number from 0 to 1 or null");
    expect(() => compareCases([], [], { resamples: 0 })).toThrow(RangeError);
  });

  it('gives the same interval for the same runs and seed', () => {
    const current = results(Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`c${i}`, (i % 3) / 2])));
    const baseline = results(Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`c${i}`, (i % 5) / 4])));
    const once = compareCases(current, baseline);
    expect(compareCases(current, baseline)).toEqual(once);
    expect(compareCases([...current].reverse(), baseline).ci95).toEqual(once.ci95);
    expect(compareCases(current, baseline, { seed: 7 }).ci95).not.toEqual(once.ci95);
  });
});

describe('the paired bootstrap', () => {
  it('collapses to the difference when every case moved by the same amount', () => {
    const current = results({ a: 0.75, b: 1, c: 0.5, d: 0.25 });
    const baseline = results({ a: 0.5, b: 0.75, c: 0.25, d: 0 });
    expect(compareCases(current, baseline)).toMatchObject({ mean_difference: 0.25, ci95: [0.25, 0.25] });
  });

  it('spans the whole range of resample means when it can', () => {
    // Two differences, 0 and 1: resample means are 0, 0.5 and 1 with probability 1/4, 1/2, 1/4, so
    // the 2.5th percentile is 0 and the 97.5th is 1.
    expect(bootstrapInterval([0, 1], 2000, 1)).toEqual([0, 1]);
  });

  it('covers the true mean of a known distribution with about the normal width', () => {
    // 400 differences uniform on [-0.4, 0.6): true mean 0.1, standard deviation 1/sqrt(12).
    const random = mulberry32(12345);
    const differences = Array.from({ length: 400 }, () => random() - 0.4);
    const current = differences.map((d, i) => ({ case_id: `c${i}`, score: 0.4 + d }));
    const baseline = differences.map((_, i) => ({ case_id: `c${i}`, score: 0.4 }));
    const { ci95, mean_difference } = compareCases(current, baseline);
    if (!ci95 || mean_difference === null) throw new Error('no interval');
    const [lo, hi] = ci95;
    expect(lo).toBeLessThan(0.1);
    expect(hi).toBeGreaterThan(0.1);
    expect(lo).toBeLessThan(mean_difference);
    expect(hi).toBeGreaterThan(mean_difference);
    const normalWidth = (2 * 1.96) / Math.sqrt(12) / Math.sqrt(400);
    expect(hi - lo).toBeGreaterThan(normalWidth * 0.85);
    expect(hi - lo).toBeLessThan(normalWidth * 1.15);
  });
});

describe('mulberry32', () => {
  it('is reproducible per seed and uniform enough', () => {
    const a = mulberry32(42);
    const b = mulberry32(42);
    const draws = Array.from({ length: 10_000 }, () => a());
    expect(draws.slice(0, 5)).toEqual(Array.from({ length: 5 }, () => b()));
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...draws)).toBeLessThan(1);
    expect(draws.reduce((s, x) => s + x, 0) / draws.length).toBeCloseTo(0.5, 1);
  });
});
