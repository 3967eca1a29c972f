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
        if (paired.length === 0) {
          expect(c).toMatchObject({ mean_current: null, mean_baseline: null, mean_difference: null, ci95: null });
          return;
        }
        for (const m of [c.mean_current!, c.mean_baseline!]) {
          expect(m).toBeGreaterThanOrEqual(0);
          expect(m).toBeLessThanOrEqual(1);
        }
        expect(Math.abs(c.mean_difference! - (c.mean_current! - c.mean_baseline!))).toBeLessThanOrEqual(1.5e-4 + 1e-12);
      }),
    );
  });

  it('the interval is ordered, within the smallest and largest paired difference, and contains the mean difference', () => {
    fc.assert(
      fc.property(run, run, fc.integer(), (current, baseline, seed) => {
        const c = compareCases(current, baseline, { seed });
        if (c.paired < 2) {
          expect(c.ci95).toBeNull();
          return;
        }
        const differences = current.flatMap((r) => {
          const b = baseline.find((x) => x.case_id === r.case_id)?.score;
          return r.score != null && b != null ? [r.score - b] : [];
        });
        const [lo, hi] = c.ci95!;
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
        if (c.mean_difference !== null) expect(Math.abs(s.mean_difference! + c.mean_difference)).toBeLessThanOrEqual(1e-4 + 1e-12);
        if (c.ci95 !== null) {
          expect(Math.abs(s.ci95![0] + c.ci95[1])).toBeLessThanOrEqual(1e-4 + 1e-12);
          expect(Math.abs(s.ci95![1] + c.ci95[0])).toBeLessThanOrEqual(1e-4 + 1e-12);
        }
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
