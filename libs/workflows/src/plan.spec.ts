import { plan } from './agent-run.workflow';
import { digest } from './digest';

describe('plan', () => {
  const state = { step: 0, max_steps: 4, goal: 'find the bug', context: '' };

  it('is a pure function of state: CPU search, then GPU embed, then finish at max_steps', () => {
    expect(plan(state)).toEqual({ kind: 'tool', tool: 'search', lane: 'cpu', args: { query: 'find the bug', step: 0 } });
    expect(plan({ ...state, step: 1, context: 'ctx' })).toEqual({ kind: 'tool', tool: 'embed', lane: 'gpu', args: { text: 'ctx', step: 1 } });
    expect(plan({ ...state, step: 4 })).toEqual({ kind: 'finish' });
    expect(plan(state)).toEqual(plan({ ...state }));
  });
});

describe('digest', () => {
  it('is stable and separates its parts', () => {
    expect(digest('search', '{"q":1}')).toBe(digest('search', '{"q":1}'));
    expect(digest('ab', 'c')).not.toBe(digest('a', 'bc'));
    expect(digest('x')).toMatch(/^[0-9a-f]{16}$/);
  });
});
