import { lineUpRuns, type RunSteps, type StepSignature } from './run-diff';

const step = (n: number, out = `out ${n}`, kind = 'tool', tool: string | null = 'search'): StepSignature => ({ step: n, kind, tool, output_sha256: out });
const run = (run_id: string, steps: StepSignature[], forked_from?: RunSteps['forked_from']): RunSteps => ({ run_id, steps, ...(forked_from ? { forked_from } : {}) });

describe('lining two runs up by step', () => {
  it('finds no divergence between two runs that did the same', () => {
    const steps = [0, 1, 2].map((n) => step(n));
    expect(lineUpRuns(run('a', steps), run('b', steps))).toEqual({ first_divergent_step: null, steps_shared: 3, steps: { run: 3, with: 3 } });
  });

  it('names the first step whose kind, tool or output differs, or that one run did not take', () => {
    const base = [0, 1, 2, 3].map((n) => step(n));
    expect(lineUpRuns(run('a', base), run('b', [...base.slice(0, 2), step(2, 'other')])).first_divergent_step).toBe(2);
    expect(lineUpRuns(run('a', base), run('b', [step(0), step(1, 'out 1', 'tool', 'embed')])).first_divergent_step).toBe(1);
    expect(lineUpRuns(run('a', base), run('b', base.slice(0, 3)))).toEqual({ first_divergent_step: 3, steps_shared: 3, steps: { run: 4, with: 3 } });
  });

  it("counts a fork's steps before its fork point as its parent's, either way round", () => {
    const parent = run('p', [0, 1, 2, 3, 4, 5, 6, 7].map((n) => step(n)));
    const fork = run('f', [step(4, 'new goal 4'), step(5, 'new goal 5')], { run_id: 'p', snapshot_id: 'snap-0004', step: 4 });
    expect(lineUpRuns(fork, parent)).toEqual({ first_divergent_step: 4, steps_shared: 4, steps: { run: 6, with: 8 } });
    expect(lineUpRuns(parent, fork)).toEqual({ first_divergent_step: 4, steps_shared: 4, steps: { run: 8, with: 6 } });
    // A fork whose new goal did not change what it did diverges where it stopped, not at the fork point.
    const same = run('g', [4, 5, 6, 7].map((n) => step(n)), { run_id: 'p', snapshot_id: 'snap-0004', step: 4 });
    expect(lineUpRuns(same, parent).first_divergent_step).toBeNull();
  });
});
