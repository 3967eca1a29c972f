import * as fc from 'fast-check';
import { bootstrapInterval, compareCases, type CaseResult } from './compare';

const round4 = (x: number) => Math.round(x * 10_000) / 10_000;
const score = fc.oneof(fc.constant(null), fc.constantFrom(0, 0.5, 1), fc.double({ min: 0, max: 1, noNaN: true }));
/** One run's results: case ids from a small pool, so two runs share some and not others. */
const run = fc.uniqueArray(fc.record({ case_id: fc.constantFrom(...'abcdefghijklmnopqrst'), score }), { maxLength: 20, selector: (r) => r.case_id });
const shuffle = (results: CaseResult[], seed: number) => results.map((r, i) => ({ r, k: (i * 7919 + seed) % 104_729 })).sort((a, b) => a.k - b.k).map(({ r }) => r);

describe('comparing two eval runs (properties)', () => {
  it('every case id is sorted into exactly one change; the means are over the cases graded in both and lie in [0, 1]', () => {
    fc.assert(
      fc.property(run, run, (current, baseline) => {
        const c = compareCases(current, baseline, { resamples: 200 });
        const ids = [...new Set([...current, ...baseline].map((r) => r.case_id))].sort();
        expect(c.cases.map((x) => x.case_id)).toEqual(ids);
        expect(Object.values(c.counts).reduce((a, b) => a + b, 0)).toBe(ids.length);
        const score = (rs: CaseResult[], id: string) => rs.find((r) => r.case_id === id)?.score;
        const paired = ids.filter((id) => score(current, id) != null && score(baseline, id) != null);
        expect(c.paired).toBe(paired.length);
        // No case graded in both runs: no means and no interval; else every mean is there.
        const none = paired.length === 0;
        expect({ mean_current: c.mean_current === null, mean_baseline: c.mean_baseline === null, mean_difference: c.mean_difference === null, ci95: none ? c.ci95 : null }).toEqual({
          mean_current: none,
          mean_baseline: none,
          mean_difference: none,
          ci95: null,
        });
        // (With none, 0 stands in for each mean, and the checks below hold trivially.)
        const [current_, baseline_, difference] = [c.mean_current ?? 0, c.mean_baseline ?? 0, c.mean_difference ?? 0];
        for (const m of [current_, baseline_]) {
          expect(m).toBeGreaterThanOrEqual(0);
          expect(m).toBeLessThanOrEqual(1);
        }
        expect(Math.abs(difference - (current_ - baseline_))).toBeLessThanOrEqual(1.5e-4 + 1e-12);
      }),
    );
  });

  it('the interval is ordered, within the smallest and largest paired difference, and contains the mean difference', () => {
    fc.assert(
      fc.property(run, run, fc.integer(), (current, baseline, seed) => {
        const c = compareCases(current, baseline, { seed });
        const differences = current.flatMap((r) => {
          const b = baseline.find((x) => x.case_id === r.case_id)?.score;
          return r.score != null && b != null ? [r.score - b] : [];
        });
        // An interval exactly when at least two cases are graded in both runs.
        expect({ paired: c.paired, interval: c.ci95 !== null }).toEqual({ paired: differences.length, interval: differences.length >= 2 });
        fc.pre(c.ci95 !== null);
        const [lo, hi] = c.ci95;
        expect(lo).toBeLessThanOrEqual(hi);
        expect(lo).toBeGreaterThanOrEqual(round4(Math.min(...differences)));
        expect(hi).toBeLessThanOrEqual(round4(Math.max(...differences)));
        expect(lo).toBeLessThanOrEqual(c.mean_difference!);
        expect(hi).toBeGreaterThanOrEqual(c.mean_difference!);
      }),
      { numRuns: 60 },
    );
  });

  it('the order results come in changes nothing; swapping the runs mirrors every answer', () => {
    fc.assert(
      fc.property(run, run, fc.nat(), (current, baseline, seed) => {
        const c = compareCases(current, baseline, { resamples: 300 });
        expect(compareCases(shuffle(current, seed), shuffle(baseline, seed + 1), { resamples: 300 })).toEqual(c);
        const s = compareCases(baseline, current, { resamples: 300 });
        expect(s.counts).toEqual({ improved: c.counts.regressed, regressed: c.counts.improved, unchanged: c.counts.unchanged, added: c.counts.removed, removed: c.counts.added });
        expect([s.mean_current, s.mean_baseline]).toEqual([c.mean_baseline, c.mean_current]);
        // Either both have a mean difference and an interval or neither has; where they do, each is the other's negation.
        expect({ difference: s.mean_difference !== null, interval: s.ci95 !== null }).toEqual({ difference: c.mean_difference !== null, interval: c.ci95 !== null });
        expect(Math.abs((s.mean_difference ?? 0) + (c.mean_difference ?? 0))).toBeLessThanOrEqual(1e-4 + 1e-12);
        const [[sLo, sHi], [cLo, cHi]] = [s.ci95 ?? [0, 0], c.ci95 ?? [0, 0]];
        expect(Math.abs(sLo + cHi)).toBeLessThanOrEqual(1e-4 + 1e-12);
        expect(Math.abs(sHi + cLo)).toBeLessThanOrEqual(1e-4 + 1e-12);
      }),
      { numRuns: 60 },
    );
  });

  it('the bootstrap is a function of its inputs and seed, and a constant difference has a point interval', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: 1, maxLength: 30 }), fc.integer({ min: 1, max: 500 }), fc.integer(), fc.double({ min: -1, max: 1, noNaN: true }), (differences, resamples, seed, d) => {
        expect(bootstrapInterval(differences, resamples, seed)).toEqual(bootstrapInterval([...differences], resamples, seed));
        const [lo, hi] = bootstrapInterval(Array<number>(differences.length).fill(d), resamples, seed);
        expect(lo).toBe(hi);
        expect(Math.abs(lo - d)).toBeLessThanOrEqual(5e-5 + 1e-12);
      }),
    );
  });
});
