import { plan, type PlanState } from './agent-run.plan';
import { digest } from './digest';

describe('plan', () => {
  const state: PlanState = { step: 0, max_steps: 40, goal: 'find the bug', context: '', research_every: 4 };

  it('thinks, searches on the CPU lane, embeds on the GPU lane, then researches or reflects', () => {
    expect(plan(state)).toEqual({ kind: 'llm', prompt: 'step 0: plan the next move toward: find the bug' });
    expect(plan({ ...state, step: 1 })).toEqual({ kind: 'tool', tool: 'search', lane: 'cpu', args: { query: 'find the bug', step: 1 } });
    expect(plan({ ...state, step: 2, context: 'ctx' })).toEqual({ kind: 'tool', tool: 'embed', lane: 'gpu', args: { text: 'ctx', step: 2 } });
    expect(plan({ ...state, step: 3 })).toEqual({ kind: 'research', question: 'what is still missing for: find the bug' });
    expect(plan({ ...state, step: 7 }).kind).toBe('llm');
    expect(plan({ ...state, step: 19 }).kind).toBe('research');
    expect(plan({ ...state, step: 40 })).toEqual({ kind: 'finish' });
  });

  it('is a pure function of state', () => {
    expect(plan({ ...state, step: 5 })).toEqual(plan({ ...state, step: 5 }));
  });

  it('a 200-step run has 13 research children', () => {
    const kinds = Array.from({ length: 200 }, (_, step) => plan({ ...state, step, max_steps: 200 }).kind);
    expect(kinds.filter((k) => k === 'research')).toHaveLength(13);
  });
});

describe('digest', () => {
  it('is stable and separates its parts', () => {
    expect(digest('search', '{"q":1}')).toBe(digest('search', '{"q":1}'));
    expect(digest('ab', 'c')).not.toBe(digest('a', 'bc'));
    expect(digest('x')).toMatch(/^[0-9a-f]{16}$/);
  });
});
