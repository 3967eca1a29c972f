import type { RunEvent } from '@agentrun/contracts';
import type { RunSummary } from './api';
import { applyEvents, mergeRuns, progressOf } from './runs-list';

const run = (run_id: string, created_at: string, last_seq = 1, status = 'running'): RunSummary => ({
  run_id,
  kind: 'agent',
  status,
  model: null,
  parent_run_id: null,
  created_at,
  updated_at: created_at,
  last_seq,
  state: { status, goal: 'g', step: 0, max_steps: 4 },
});

describe('the runs list', () => {
  it('merges pages and refreshes into one row per run, newest first, keeping the fresher row', () => {
    const shown = [run('b', '2026-01-01T00:00:02.000Z', 3), run('a', '2026-01-01T00:00:01.000Z')];
    const head = [run('c', '2026-01-01T00:00:03.000Z'), run('b', '2026-01-01T00:00:02.000Z', 2, 'paused')];
    const merged = mergeRuns(shown, head);
    expect(merged.map((r) => r.run_id)).toEqual(['c', 'b', 'a']);
    expect(merged[1].last_seq).toBe(3); // the older copy did not win
    const ties = mergeRuns([], [run('x1', '2026-01-01T00:00:00.000Z'), run('x2', '2026-01-01T00:00:00.000Z')]);
    expect(ties.map((r) => r.run_id)).toEqual(['x2', 'x1']);
  });

  it('a row follows its events: status and progress from the newest state, old seqs ignored', () => {
    const events = [2, 3, 1].map(
      (seq): RunEvent => ({ run_id: 'a', org: 'o', kind: 'agent', seq, type: 'x', ts: `2026-01-01T00:00:0${seq}.000Z`, payload: { state: { status: seq === 3 ? 'done' : 'running', step: seq, max_steps: 4 } } }),
    );
    const moved = applyEvents(run('a', '2026-01-01T00:00:00.000Z'), events);
    expect(moved).toMatchObject({ status: 'done', last_seq: 3 });
    expect(progressOf(moved)).toBe('step 3/4');
  });
});
