import { EVAL_SCORER_NAMES, EVAL_SOLVER_NAMES } from '@agentrun/contracts';
import { SCORER_NAMES, SOLVER_NAMES } from '@agentrun/evals';

// The contracts document the names (the wire schema refuses others with a 400 that lists them); the evals
// library knows each one's options and runs them. They must name the same things.
describe('eval scorer and solver names', () => {
  it('are the same in the wire schema and in the evals library', () => {
    expect([...EVAL_SCORER_NAMES]).toEqual([...SCORER_NAMES]);
    expect([...EVAL_SOLVER_NAMES]).toEqual([...SOLVER_NAMES]);
  });
});
